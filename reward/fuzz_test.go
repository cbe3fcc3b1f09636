package reward

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

// fuzzSeeds are valid and invalid REWARD_SPECs as JSON. The same inputs are
// committed under testdata/fuzz/FuzzParse so plain `go test` replays them.
var fuzzSeeds = []string{
	`{"weights": {"accuracy": 0.7, "speed": 0.2, "cost": 0.1}, "accuracy": {}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}`,
	`{"weights": {"accuracy": 7, "speed": 2, "cost": 1}, "accuracy": {"reference": 0.5}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}`,
	`[1, 2, 3]`,
	`{"weights": {"accuracy": 0.7, "speed": 0.2, "cost": 0.1}, "accuracy": {}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}, "speeed": {}}`,
	`{"accuracy": {}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}`,
	`{"weights": {"speed": 0.2, "cost": 0.1, "latency": 1}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}`,
	`{"weights": {"accuracy": "0.5", "speed": true, "cost": null}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}`,
	`{"weights": {"accuracy": 0.7, "speed": -0.2, "cost": 0.1}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}`,
	`{"weights": {"accuracy": 0, "speed": 0.0, "cost": 0}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}`,
	`{"weights": {"accuracy": 1e400, "speed": 1e308, "cost": 1e308}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}`,
	`{"weights": {"accuracy": 1, "speed": 1, "cost": 0}, "accuracy": {"reference": 0}, "speed": {"reference": 2000}, "cost": {"reference": 0.01}}`,
	`{"weights": {"accuracy": 1, "speed": 1, "cost": 1}, "accuracy": [], "speed": {"reference": 0}, "cost": {}}`,
	`{"weights": {"accuracy": 1, "speed": 1, "cost": 1}, "speed": 2000, "cost": {"reference": -0.01}}`,
	`{"weights": {"accuracy": 1e308, "speed": 1e308, "cost": 1e308}, "speed": {"reference": 5e-324}, "cost": {"reference": 9223372036854775807}}`,
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, ok := decodePython(data)
		if !ok {
			return
		}
		s, err := Parse(v)
		if err != nil {
			if s != nil {
				t.Fatalf("Parse returned both a spec and an error: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "REWARD_SPEC") {
				t.Fatalf("error does not start with REWARD_SPEC: %q", err)
			}
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("error is %T, want *SpecError", err)
			}
			return
		}
		if s == nil {
			t.Fatal("Parse returned neither a spec nor an error")
		}
		w := []float64{s.Weights.Accuracy, s.Weights.Speed, s.Weights.Cost}
		sum := 0.0
		for _, x := range w {
			if !(x >= 0) || math.IsInf(x, 0) {
				t.Fatalf("bad normalised weight %v in %+v", x, s.Weights)
			}
			sum += x
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("weights sum to %v, want 1: %+v", sum, s.Weights)
		}
		refs := []float64{s.SpeedReferenceMS, s.CostReferenceUSD}
		if s.AccuracyReference != nil {
			refs = append(refs, *s.AccuracyReference)
		}
		for _, r := range refs {
			if !(r > 0) || math.IsInf(r, 0) {
				t.Fatalf("bad reference %v in %+v", r, s)
			}
		}

		// A valid spec must give a total in [0, 1] for any valid case.
		acc := 1.0
		if s.AccuracyReference != nil {
			acc = *s.AccuracyReference
		}
		run, cost := s.SpeedReferenceMS, s.CostReferenceUSD
		p, err := s.Compute(acc, "fb", Observation{RunMS: &run, CostUSD: &cost})
		if err != nil {
			t.Fatalf("Compute on a valid case: %v", err)
		}
		if !(p.Total >= 0 && p.Total <= 1+1e-12) {
			t.Fatalf("total %v outside [0, 1]: %+v", p.Total, p)
		}
	})
}

// decodePython decodes JSON into the shapes Parse receives from Python:
// integers as int64, other numbers as float64. ok is false for invalid JSON.
func decodePython(data []byte) (v any, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return convertNumbers(v), true
}

func convertNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		// Out-of-range floats parse to ±Inf, which Parse must reject.
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = convertNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = convertNumbers(e)
		}
		return x
	}
	return v
}
