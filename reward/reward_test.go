package reward

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seedSpec returns a fresh copy of the product's REWARD_SPEC, decoded the
// way it arrives from Python.
func seedSpec() map[string]any {
	return map[string]any{
		"weights":  map[string]any{"accuracy": 0.7, "speed": 0.2, "cost": 0.1},
		"accuracy": map[string]any{},
		"speed":    map[string]any{"reference": int64(2000)},
		"cost":     map[string]any{"reference": 0.01},
	}
}

// with returns the seed spec after applying edit to it.
func with(edit func(m map[string]any)) map[string]any {
	m := seedSpec()
	edit(m)
	return m
}

// setIn sets m[section][key] = v.
func setIn(section, key string, v any) func(map[string]any) {
	return func(m map[string]any) { m[section].(map[string]any)[key] = v }
}

// deleteIn deletes m[section][key].
func deleteIn(section, key string) func(map[string]any) {
	return func(m map[string]any) { delete(m[section].(map[string]any), key) }
}

func ptr(v float64) *float64 { return &v }

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		spec any
		want string
	}{
		// The spec itself.
		{"spec is list", []any{}, "REWARD_SPEC must be a dict, got list"},
		{"spec is None", nil, "REWARD_SPEC must be a dict, got None"},
		{"spec is str", "x", "REWARD_SPEC must be a dict, got str 'x'"},
		{"unknown top-level key", with(func(m map[string]any) { m["speeed"] = map[string]any{} }),
			"REWARD_SPEC: speeed is not a known key (allowed: weights, accuracy, speed, cost)"},
		{"first unknown key alphabetically", with(func(m map[string]any) { m["zeta"] = 1.0; m["alpha"] = 1.0 }),
			"REWARD_SPEC: alpha is not a known key (allowed: weights, accuracy, speed, cost)"},

		// weights.
		{"weights missing", with(func(m map[string]any) { delete(m, "weights") }), "REWARD_SPEC: weights is missing"},
		{"weights is list", with(func(m map[string]any) { m["weights"] = []any{0.7, 0.2, 0.1} }),
			"REWARD_SPEC: weights must be a dict, got list"},
		{"weights is None", with(func(m map[string]any) { m["weights"] = nil }),
			"REWARD_SPEC: weights must be a dict, got None"},
		{"unknown weight key", with(setIn("weights", "latency", 0.1)),
			"REWARD_SPEC: weights.latency is not a known key (allowed: accuracy, speed, cost)"},
		{"weights.accuracy missing", with(deleteIn("weights", "accuracy")), "REWARD_SPEC: weights.accuracy is missing"},
		{"weights.speed missing", with(deleteIn("weights", "speed")), "REWARD_SPEC: weights.speed is missing"},
		{"weights.cost missing", with(deleteIn("weights", "cost")), "REWARD_SPEC: weights.cost is missing"},
		{"weight is str", with(setIn("weights", "accuracy", "0.5")),
			"REWARD_SPEC: weights.accuracy must be a number, got str '0.5'"},
		{"weight is bool", with(setIn("weights", "speed", true)),
			"REWARD_SPEC: weights.speed must be a number, got bool True"},
		{"weight is bool False", with(setIn("weights", "speed", false)),
			"REWARD_SPEC: weights.speed must be a number, got bool False"},
		{"weight is None", with(setIn("weights", "cost", nil)),
			"REWARD_SPEC: weights.cost must be a number, got None"},
		{"weight is dict", with(setIn("weights", "cost", map[string]any{})),
			"REWARD_SPEC: weights.cost must be a number, got dict"},
		{"weight is NaN", with(setIn("weights", "accuracy", math.NaN())),
			"REWARD_SPEC: weights.accuracy must be finite, got NaN"},
		{"weight is +Inf", with(setIn("weights", "speed", math.Inf(1))),
			"REWARD_SPEC: weights.speed must be finite, got +Inf"},
		{"weight is -Inf", with(setIn("weights", "cost", math.Inf(-1))),
			"REWARD_SPEC: weights.cost must be finite, got -Inf"},
		{"negative weight (spec example)", with(setIn("weights", "speed", -0.2)),
			"REWARD_SPEC: weights.speed must be >= 0, got -0.2"},
		{"negative int weight", with(setIn("weights", "cost", int64(-1))),
			"REWARD_SPEC: weights.cost must be >= 0, got -1"},
		{"negative Go int weight", with(setIn("weights", "accuracy", -3)),
			"REWARD_SPEC: weights.accuracy must be >= 0, got -3"},
		{"all weights 0", with(func(m map[string]any) {
			m["weights"] = map[string]any{"accuracy": int64(0), "speed": 0.0, "cost": 0}
		}), "REWARD_SPEC: weights must not all be 0"},

		// accuracy (optional section).
		{"accuracy is list", with(func(m map[string]any) { m["accuracy"] = []any{} }),
			"REWARD_SPEC: accuracy must be a dict, got list"},
		{"accuracy is None", with(func(m map[string]any) { m["accuracy"] = nil }),
			"REWARD_SPEC: accuracy must be a dict, got None"},
		{"accuracy unknown key", with(setIn("accuracy", "refrence", 0.5)),
			"REWARD_SPEC: accuracy.refrence is not a known key (allowed: reference)"},
		{"accuracy.reference str", with(setIn("accuracy", "reference", "1")),
			"REWARD_SPEC: accuracy.reference must be a number, got str '1'"},
		{"accuracy.reference bool", with(setIn("accuracy", "reference", true)),
			"REWARD_SPEC: accuracy.reference must be a number, got bool True"},
		{"accuracy.reference None", with(setIn("accuracy", "reference", nil)),
			"REWARD_SPEC: accuracy.reference must be a number, got None"},
		{"accuracy.reference NaN", with(setIn("accuracy", "reference", math.NaN())),
			"REWARD_SPEC: accuracy.reference must be finite, got NaN"},
		{"accuracy.reference 0", with(setIn("accuracy", "reference", int64(0))),
			"REWARD_SPEC: accuracy.reference must be > 0, got 0"},
		{"accuracy.reference negative", with(setIn("accuracy", "reference", -0.5)),
			"REWARD_SPEC: accuracy.reference must be > 0, got -0.5"},

		// speed.
		{"speed missing", with(func(m map[string]any) { delete(m, "speed") }), "REWARD_SPEC: speed is missing"},
		{"speed is int", with(func(m map[string]any) { m["speed"] = int64(2000) }),
			"REWARD_SPEC: speed must be a dict, got int 2000"},
		{"speed unknown key", with(setIn("speed", "ref", 2000.0)),
			"REWARD_SPEC: speed.ref is not a known key (allowed: reference)"},
		{"speed.reference missing", with(deleteIn("speed", "reference")), "REWARD_SPEC: speed.reference is missing"},
		{"speed.reference str", with(setIn("speed", "reference", "2000")),
			"REWARD_SPEC: speed.reference must be a number, got str '2000'"},
		{"speed.reference bool", with(setIn("speed", "reference", false)),
			"REWARD_SPEC: speed.reference must be a number, got bool False"},
		{"speed.reference Inf", with(setIn("speed", "reference", math.Inf(1))),
			"REWARD_SPEC: speed.reference must be finite, got +Inf"},
		{"speed.reference 0", with(setIn("speed", "reference", int64(0))),
			"REWARD_SPEC: speed.reference must be > 0, got 0"},
		{"speed.reference negative", with(setIn("speed", "reference", -5.5)),
			"REWARD_SPEC: speed.reference must be > 0, got -5.5"},

		// cost.
		{"cost missing", with(func(m map[string]any) { delete(m, "cost") }), "REWARD_SPEC: cost is missing"},
		{"cost is float", with(func(m map[string]any) { m["cost"] = 0.01 }),
			"REWARD_SPEC: cost must be a dict, got float 0.01"},
		{"cost unknown key", with(setIn("cost", "usd", 0.01)),
			"REWARD_SPEC: cost.usd is not a known key (allowed: reference)"},
		{"cost.reference missing", with(deleteIn("cost", "reference")), "REWARD_SPEC: cost.reference is missing"},
		{"cost.reference list", with(setIn("cost", "reference", []any{0.01})),
			"REWARD_SPEC: cost.reference must be a number, got list"},
		{"cost.reference str with quote", with(setIn("cost", "reference", "it's")),
			`REWARD_SPEC: cost.reference must be a number, got str 'it\'s'`},
		{"cost.reference NaN", with(setIn("cost", "reference", math.NaN())),
			"REWARD_SPEC: cost.reference must be finite, got NaN"},
		{"cost.reference 0.0", with(setIn("cost", "reference", 0.0)),
			"REWARD_SPEC: cost.reference must be > 0, got 0"},
		{"cost.reference negative", with(setIn("cost", "reference", -0.01)),
			"REWARD_SPEC: cost.reference must be > 0, got -0.01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.spec)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Equal(t, tt.want, err.Error())
			var se *SpecError
			assert.True(t, errors.As(err, &se), "error must be a *SpecError")
		})
	}
}

func TestSpecErrorFields(t *testing.T) {
	_, err := Parse(with(setIn("weights", "speed", -0.2)))
	var se *SpecError
	require.True(t, errors.As(err, &se))
	assert.Equal(t, SpecError{Key: "weights.speed", Rule: "must be >= 0", Got: "-0.2"}, *se)
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name                  string
		spec                  map[string]any
		accuracy, speed, cost float64
		accuracyRef           *float64
		speedRef, costRef     float64
	}{
		{"seed spec", seedSpec(), 0.7, 0.2, 0.1, nil, 2000, 0.01},
		{"weights 7,2,1 normalised", with(func(m map[string]any) {
			m["weights"] = map[string]any{"accuracy": int64(7), "speed": int64(2), "cost": int64(1)}
		}), 0.7, 0.2, 0.1, nil, 2000, 0.01},
		{"weights 1,1,0 normalised", with(func(m map[string]any) {
			m["weights"] = map[string]any{"accuracy": 1, "speed": 1.0, "cost": int64(0)}
		}), 0.5, 0.5, 0, nil, 2000, 0.01},
		{"only one weight", with(func(m map[string]any) {
			m["weights"] = map[string]any{"accuracy": 0.0, "speed": 0.0, "cost": 3.0}
		}), 0, 0, 1, nil, 2000, 0.01},
		{"huge weights do not overflow", with(func(m map[string]any) {
			m["weights"] = map[string]any{"accuracy": 1e308, "speed": 1e308, "cost": 1e308}
		}), 1.0 / 3, 1.0 / 3, 1.0 / 3, nil, 2000, 0.01},
		{"accuracy section absent", with(func(m map[string]any) { delete(m, "accuracy") }),
			0.7, 0.2, 0.1, nil, 2000, 0.01},
		{"accuracy reference set", with(setIn("accuracy", "reference", 0.5)),
			0.7, 0.2, 0.1, ptr(0.5), 2000, 0.01},
		{"int references", with(func(m map[string]any) {
			m["accuracy"] = map[string]any{"reference": int64(3)}
			m["speed"] = map[string]any{"reference": 150}
			m["cost"] = map[string]any{"reference": int64(2)}
		}), 0.7, 0.2, 0.1, ptr(3), 150, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.spec)
			require.NoError(t, err)
			require.NotNil(t, s)
			assert.InDelta(t, tt.accuracy, s.Weights.Accuracy, 1e-12)
			assert.InDelta(t, tt.speed, s.Weights.Speed, 1e-12)
			assert.InDelta(t, tt.cost, s.Weights.Cost, 1e-12)
			assert.InDelta(t, 1, s.Weights.Accuracy+s.Weights.Speed+s.Weights.Cost, 1e-12)
			assert.Equal(t, tt.accuracyRef, s.AccuracyReference)
			assert.Equal(t, tt.speedRef, s.SpeedReferenceMS)
			assert.Equal(t, tt.costRef, s.CostReferenceUSD)
		})
	}
}

func mustParse(t *testing.T, v any) *Spec {
	t.Helper()
	s, err := Parse(v)
	require.NoError(t, err)
	return s
}

func TestCompute(t *testing.T) {
	seed := seedSpec()
	withRef := with(setIn("accuracy", "reference", 0.5))
	tests := []struct {
		name                  string
		spec                  map[string]any
		accuracy              float64
		feedback              string
		obs                   Observation
		acc, speed, cost, tot float64
		wantFeedback          string
	}{
		{
			name: "seed example", spec: seed, accuracy: 1.0, feedback: "All rows match.",
			obs: Observation{RunMS: ptr(2000), CostUSD: ptr(0.01)},
			acc: 1, speed: 0.5, cost: 0.5, tot: 0.85,
			wantFeedback: "All rows match. Run took 2000 ms (reference 2000 ms) and cost $0.01 (reference $0.01).",
		},
		{
			// accuracy 0.25 against reference 0.5: 0.5/0.75 = 2/3; 1000 ms against
			// 2000 ms: 2/3; $0.03 against $0.01: 0.25.
			// total = 0.7*2/3 + 0.2*2/3 + 0.1*0.25 = 0.6 + 0.025 = 0.625.
			name: "accuracy reference (error value)", spec: withRef, accuracy: 0.25, feedback: "RMSE 0.25.",
			obs: Observation{RunMS: ptr(1000), CostUSD: ptr(0.03)},
			acc: 2.0 / 3, speed: 2.0 / 3, cost: 0.25, tot: 0.625,
			wantFeedback: "RMSE 0.25. Run took 1000 ms (reference 2000 ms) and cost $0.03 (reference $0.01).",
		},
		{
			name: "zero error is a perfect accuracy part", spec: withRef, accuracy: 0,
			obs: Observation{RunMS: ptr(0), CostUSD: ptr(0)},
			acc: 1, speed: 1, cost: 1, tot: 1,
			wantFeedback: "Run took 0 ms (reference 2000 ms) and cost $0 (reference $0.01).",
		},
		{
			name: "time not measured", spec: seed, accuracy: 0.5, feedback: "Half right.",
			obs: Observation{CostUSD: ptr(0.01)},
			acc: 0.5, speed: 0, cost: 0.5, tot: 0.35 + 0.05,
			wantFeedback: "Half right. Run time was not measured, so the speed part is 0; run cost $0.01 (reference $0.01).",
		},
		{
			name: "cost not measured", spec: seed, accuracy: 0.5, feedback: "Half right.",
			obs: Observation{RunMS: ptr(1234.56)},
			acc: 0.5, speed: 2000 / 3234.56, cost: 0, tot: 0.35 + 0.2*2000/3234.56,
			wantFeedback: "Half right. Run took 1234.6 ms (reference 2000 ms); cost was not measured, so the cost part is 0.",
		},
		{
			name: "neither measured", spec: seed, accuracy: 1, feedback: "Correct.",
			acc: 1, speed: 0, cost: 0, tot: 0.7,
			wantFeedback: "Correct. Run time and cost were not measured, so the speed and cost parts are 0.",
		},
		{
			name: "empty feedback gets no leading space", spec: seed, accuracy: 0,
			obs: Observation{RunMS: ptr(6000), CostUSD: ptr(0.004)},
			acc: 0, speed: 0.25, cost: 0.01 / 0.014, tot: 0.05 + 0.1*0.01/0.014,
			wantFeedback: "Run took 6000 ms (reference 2000 ms) and cost $0.004 (reference $0.01).",
		},
		{
			name: "feedback ending in whitespace gets no extra space", spec: seed, accuracy: 1, feedback: "Line one.\n",
			acc: 1, tot: 0.7,
			wantFeedback: "Line one.\nRun time and cost were not measured, so the speed and cost parts are 0.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.spec)
			p, err := s.Compute(tt.accuracy, tt.feedback, tt.obs)
			require.NoError(t, err)
			assert.InDelta(t, tt.acc, p.Accuracy, 1e-12)
			assert.InDelta(t, tt.speed, p.Speed, 1e-12)
			assert.InDelta(t, tt.cost, p.Cost, 1e-12)
			assert.InDelta(t, tt.tot, p.Total, 1e-12)
			assert.Equal(t, tt.wantFeedback, p.Feedback)
		})
	}
}

func TestComputeErrors(t *testing.T) {
	seed := mustParse(t, seedSpec())
	withRef := mustParse(t, with(setIn("accuracy", "reference", 0.5)))
	measured := Observation{RunMS: ptr(1000), CostUSD: ptr(0.01)}
	tests := []struct {
		name     string
		spec     *Spec
		accuracy float64
		obs      Observation
		want     string
	}{
		{"accuracy above 1 without reference", seed, 1.5, measured,
			"reward: accuracy must be a score in [0, 1] (REWARD_SPEC has no accuracy.reference), got 1.5"},
		{"accuracy below 0 without reference", seed, -0.1, measured,
			"reward: accuracy must be a score in [0, 1] (REWARD_SPEC has no accuracy.reference), got -0.1"},
		{"negative error value with reference", withRef, -0.1, measured,
			"reward: accuracy must be an error value >= 0 (REWARD_SPEC has accuracy.reference), got -0.1"},
		{"NaN accuracy", seed, math.NaN(), measured, "reward: accuracy must be finite, got NaN"},
		{"Inf accuracy with reference", withRef, math.Inf(1), measured, "reward: accuracy must be finite, got +Inf"},
		{"negative run time", seed, 1, Observation{RunMS: ptr(-5)},
			"reward: measured run time must be finite and >= 0 ms, got -5"},
		{"NaN run time", seed, 1, Observation{RunMS: ptr(math.NaN())},
			"reward: measured run time must be finite and >= 0 ms, got NaN"},
		{"negative cost", seed, 1, Observation{RunMS: ptr(5), CostUSD: ptr(-0.01)},
			"reward: measured cost must be finite and >= 0 USD, got -0.01"},
		{"Inf cost", seed, 1, Observation{CostUSD: ptr(math.Inf(1))},
			"reward: measured cost must be finite and >= 0 USD, got +Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.spec.Compute(tt.accuracy, "fb", tt.obs)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			assert.Equal(t, Parts{}, p)
		})
	}
}

func TestComputeAccuracyBounds(t *testing.T) {
	s := mustParse(t, seedSpec())
	for _, a := range []float64{0, 1} {
		p, err := s.Compute(a, "", Observation{})
		require.NoError(t, err)
		assert.Equal(t, a, p.Accuracy)
	}
	// With a reference any error >= 0 is fine and the part stays in (0, 1].
	r := mustParse(t, with(setIn("accuracy", "reference", 0.5)))
	p, err := r.Compute(1e9, "", Observation{})
	require.NoError(t, err)
	assert.InDelta(t, 0.5/(0.5+1e9), p.Accuracy, 1e-18)
}

func TestFormatMS(t *testing.T) {
	for in, want := range map[float64]string{
		0: "0", 1500: "1500", 2000: "2000", 1234.56: "1234.6", 0.25: "0.2", 12.5: "12.5", 1499.96: "1500",
	} {
		assert.Equal(t, want, formatMS(in), "formatMS(%v)", in)
	}
}

func TestFormatUSD(t *testing.T) {
	for in, want := range map[float64]string{
		0: "0", 0.004: "0.004", 0.01: "0.01", 0.0123456: "0.01235", 12.3456: "12.35",
		1234.56: "1235", 0.0001234567: "0.0001235", 9.99996: "10", 1: "1", 0.1: "0.1",
	} {
		assert.Equal(t, want, formatUSD(in), "formatUSD(%v)", in)
	}
}

// Rounding in the weighted sum must never push the total above 1.
func TestTotalStaysInRange(t *testing.T) {
	s, err := Parse(map[string]any{
		"weights": map[string]any{"accuracy": 0.7, "speed": 0.2, "cost": 0.1},
		"speed":   map[string]any{"reference": int64(2000)}, "cost": map[string]any{"reference": 0.01},
	})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0.0
	p, err := s.Compute(1, "", Observation{RunMS: &zero, CostUSD: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 1 {
		t.Fatalf("total = %v, want exactly 1", p.Total)
	}
}
