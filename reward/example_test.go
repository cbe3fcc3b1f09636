package reward_test

import (
	"fmt"

	"github.com/skynetml/skynet/reward"
)

func Example() {
	// REWARD_SPEC as decoded from Python: ints arrive as int64.
	spec, err := reward.Parse(map[string]any{
		"weights":  map[string]any{"accuracy": 0.7, "speed": 0.2, "cost": 0.1},
		"accuracy": map[string]any{},
		"speed":    map[string]any{"reference": int64(2000)},
		"cost":     map[string]any{"reference": 0.01},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	runMS, costUSD := 1500.0, 0.004
	p, err := spec.Compute(0.9, "9 of 10 rows match.", reward.Observation{RunMS: &runMS, CostUSD: &costUSD})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("accuracy %.4f, speed %.4f, cost %.4f, total %.4f\n", p.Accuracy, p.Speed, p.Cost, p.Total)
	fmt.Println(p.Feedback)

	// Unmeasured run time and cost make those parts 0.
	p, _ = spec.Compute(0.9, "9 of 10 rows match.", reward.Observation{})
	fmt.Printf("total %.4f\n", p.Total)
	fmt.Println(p.Feedback)

	// A bad spec is rejected when the metric loads.
	_, err = reward.Parse(map[string]any{
		"weights": map[string]any{"accuracy": 0.7, "speed": -0.2, "cost": 0.1},
		"speed":   map[string]any{"reference": int64(2000)},
		"cost":    map[string]any{"reference": 0.01},
	})
	fmt.Println(err)

	// Output:
	// accuracy 0.9000, speed 0.5714, cost 0.7143, total 0.8157
	// 9 of 10 rows match. Run took 1500 ms (reference 2000 ms) and cost $0.004 (reference $0.01).
	// total 0.6300
	// 9 of 10 rows match. Run time and cost were not measured, so the speed and cost parts are 0.
	// REWARD_SPEC: weights.speed must be >= 0, got -0.2
}
