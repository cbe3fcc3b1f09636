package llm

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
)

// Price is what a model charges, in USD per token.
type Price struct {
	Input, Output float64 // per prompt token, per completion token
}

// Prices maps model names to prices. A model is looked up by its full
// "provider/model" name, then by the name after the provider.
type Prices map[string]Price

func (p Prices) lookup(model string) (Price, bool) {
	if pr, ok := p[model]; ok {
		return pr, true
	}
	if i := strings.Index(model, "/"); i >= 0 {
		pr, ok := p[model[i+1:]]
		return pr, ok
	}
	return Price{}, false
}

// LoadPrices reads a price file: a JSON object keyed by model name whose
// entries are either Skynet's {"input_per_mtok", "output_per_mtok"} (USD per
// million tokens) or LiteLLM's {"input_cost_per_token", "output_cost_per_token"}
// (USD per token, as in LiteLLM's published file; its other keys and entries
// without prices are ignored). Shapes are detected per entry.
func LoadPrices(path string) (Prices, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price file: %w", err)
	}
	return ParsePrices(data, path)
}

// ParsePrices is LoadPrices on bytes; name is used in errors.
func ParsePrices(data []byte, name string) (Prices, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("price file %s: must be a JSON object keyed by model name: %v", name, err)
	}
	models := make([]string, 0, len(raw))
	for m := range raw {
		models = append(models, m)
	}
	sort.Strings(models)
	out := Prices{}
	for _, m := range models {
		var entry map[string]any
		if err := json.Unmarshal(raw[m], &entry); err != nil {
			return nil, fmt.Errorf("price file %s: model %q: must be an object", name, m)
		}
		if _, ok := entry["input_per_mtok"]; ok || entry["output_per_mtok"] != nil {
			in, err1 := priceField(entry, "input_per_mtok")
			outp, err2 := priceField(entry, "output_per_mtok")
			if err := firstErr(err1, err2); err != nil {
				return nil, fmt.Errorf("price file %s: model %q: %v", name, m, err)
			}
			out[m] = Price{Input: in / 1e6, Output: outp / 1e6}
			continue
		}
		_, hasIn := entry["input_cost_per_token"]
		_, hasOut := entry["output_cost_per_token"]
		if !hasIn && !hasOut {
			continue // LiteLLM entries without token prices (e.g. sample_spec, image models)
		}
		in, err1 := priceField(entry, "input_cost_per_token")
		outp, err2 := priceField(entry, "output_cost_per_token")
		if err := firstErr(err1, err2); err != nil {
			if m == "sample_spec" {
				continue
			}
			return nil, fmt.Errorf("price file %s: model %q: %v", name, m, err)
		}
		out[m] = Price{Input: in, Output: outp}
	}
	return out, nil
}

func priceField(entry map[string]any, key string) (float64, error) {
	v, ok := entry[key]
	if !ok {
		return 0, fmt.Errorf("%s is missing", key)
	}
	f, ok := v.(float64)
	if !ok {
		return 0, fmt.Errorf("%s must be a number, got %v", key, v)
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s must be a number >= 0, got %v", key, f)
	}
	return f, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
