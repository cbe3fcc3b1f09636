package stats

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/skynetml/skynet/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reference computes, with SciPy and statsmodels in the pinned test venv,
// what each function here must give for the same data.
const reference = `
import json, sys
import numpy as np
import scipy.stats as st
import statsmodels.api as sm
from statsmodels.stats.contingency_tables import mcnemar

data = json.load(open(sys.argv[1]))
out = {"means": [], "clustered": [], "paired": [], "mcnemar": [], "tq": []}
for xs in data["means"]:
    x = np.array(xs)
    se = st.sem(x)
    lo, hi = st.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=se)
    out["means"].append([x.mean(), se, lo, hi])
for c in data["clustered"]:
    y, g = np.array(c["y"]), np.array(c["g"])
    r = sm.OLS(y, np.ones(len(y))).fit(cov_type="cluster", cov_kwds={"groups": g})
    k = len(set(c["g"]))
    lo, hi = st.t.interval(0.95, k - 1, loc=r.params[0], scale=r.bse[0])
    out["clustered"].append([r.params[0], r.bse[0], lo, hi])
for p in data["paired"]:
    r = st.ttest_rel(p["new"], p["base"])
    ci = r.confidence_interval(0.95)
    out["paired"].append([float(np.mean(np.subtract(p["new"], p["base"]))), ci.low, ci.high])
for b, c in data["mcnemar"]:
    out["mcnemar"].append(mcnemar([[5, b], [c, 7]], exact=True).pvalue)
for p, df in data["tq"]:
    out["tq"].append(st.t.ppf(p, df))
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    return None if v != v else float(v)
json.dump(clean(out), sys.stdout)
`

// closeTo says got is want to rel relative (absolute near 0); want nil
// (NaN from Python: no interval for a constant sample) wants NaN.
func closeTo(t *testing.T, want *float64, got, rel float64, what string) {
	t.Helper()
	if want == nil {
		if !math.IsNaN(got) && what != "" {
			t.Logf("%s: SciPy gives NaN, skynet %.17g", what, got)
		}
		return
	}
	if math.Abs(got-*want) > rel*math.Max(math.Abs(*want), 1e-3) {
		t.Errorf("%s: got %.17g, SciPy/statsmodels %.17g (off by %.3g)", what, got, *want, got-*want)
	}
}

// TestAgainstSciPy holds the mean, its SE and interval, the clustered SE,
// the paired difference's interval, McNemar's exact p and t's quantiles to
// SciPy's and statsmodels' figures on generated data, to 1e-9.
func TestAgainstSciPy(t *testing.T) {
	venv := testenv.Venv(t, "")
	rng := rand.New(rand.NewPCG(7, 11))
	type clustered struct {
		Y []float64 `json:"y"`
		G []int     `json:"g"`
	}
	type paired struct {
		Base []float64 `json:"base"`
		New  []float64 `json:"new"`
	}
	var data struct {
		Means     [][]float64  `json:"means"`
		Clustered []clustered  `json:"clustered"`
		Paired    []paired     `json:"paired"`
		McNemar   [][2]int     `json:"mcnemar"`
		TQ        [][2]float64 `json:"tq"`
	}
	for _, n := range []int{2, 3, 10, 57, 1000, 20000} {
		var binary, cont []float64
		for range n {
			binary = append(binary, float64(rng.IntN(2)))
			cont = append(cont, rng.NormFloat64()*0.3+0.6)
		}
		data.Means = append(data.Means, binary, cont)
	}
	for _, shape := range [][2]int{{2, 3}, {5, 4}, {40, 7}, {300, 12}} {
		var c clustered
		for g := range shape[0] {
			bias := rng.Float64()
			for range 1 + rng.IntN(shape[1]) {
				c.G = append(c.G, g)
				c.Y = append(c.Y, math.Round(bias+rng.Float64()*0.5))
			}
		}
		data.Clustered = append(data.Clustered, c)
	}
	for _, n := range []int{3, 40, 5000} {
		var p paired
		for range n {
			b := rng.Float64()
			p.Base, p.New = append(p.Base, b), append(p.New, b+rng.NormFloat64()*0.2+0.03)
		}
		data.Paired = append(data.Paired, p)
	}
	data.McNemar = [][2]int{{0, 0}, {3, 10}, {10, 3}, {7, 7}, {0, 25}, {400, 350}, {1000, 1100}}
	data.TQ = [][2]float64{{0.975, 1}, {0.975, 2}, {0.975, 9}, {0.975, 99}, {0.975, 1e6}, {0.995, 4}, {0.6, 3}, {0.025, 12}}

	dir := t.TempDir()
	b, err := json.Marshal(data)
	require.NoError(t, err)
	in := filepath.Join(dir, "data.json")
	require.NoError(t, os.WriteFile(in, b, 0o644))
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), "-W", "ignore", "-c", reference, in)
	out, err := cmd.Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "%s", stderr)
	var want struct {
		Means, Clustered, Paired [][]*float64
		McNemar, TQ              []*float64
	}
	require.NoError(t, json.Unmarshal(out, &want))

	const rel = 1e-9
	for i, xs := range data.Means {
		var m Mean
		for _, x := range xs {
			m.Add(x)
		}
		lo, hi := m.Interval(0.95)
		w := want.Means[i]
		what := fmt.Sprintf("mean of %d values (set %d)", len(xs), i)
		closeTo(t, w[0], m.Mean(), rel, what)
		closeTo(t, w[1], m.SE(), rel, what+": standard error")
		closeTo(t, w[2], lo, rel, what+": interval's low end")
		closeTo(t, w[3], hi, rel, what+": interval's high end")
	}
	for i, c := range data.Clustered {
		var cl Clustered
		for j, y := range c.Y {
			cl.Add(fmt.Sprint(c.G[j]), y)
		}
		lo, hi := cl.Interval(0.95)
		w := want.Clustered[i]
		what := fmt.Sprintf("clustered: %d values in %d clusters", len(c.Y), cl.Clusters())
		closeTo(t, w[0], cl.Mean(), rel, what)
		closeTo(t, w[1], cl.SE(), rel, what+": standard error")
		closeTo(t, w[2], lo, rel, what+": interval's low end")
		closeTo(t, w[3], hi, rel, what+": interval's high end")
	}
	for i, p := range data.Paired {
		var d Mean
		for j := range p.Base {
			d.Add(p.New[j] - p.Base[j])
		}
		lo, hi := d.Interval(0.95)
		w := want.Paired[i]
		what := fmt.Sprintf("paired difference of %d", len(p.Base))
		closeTo(t, w[0], d.Mean(), rel, what)
		closeTo(t, w[1], lo, rel, what+": interval's low end")
		closeTo(t, w[2], hi, rel, what+": interval's high end")
	}
	for i, bc := range data.McNemar {
		closeTo(t, want.McNemar[i], McNemar(bc[0], bc[1]), rel, fmt.Sprintf("McNemar's exact p for b=%d, c=%d", bc[0], bc[1]))
	}
	for i, q := range data.TQ {
		closeTo(t, want.TQ[i], TQuantile(q[0], q[1]), rel, fmt.Sprintf("t quantile %v with %v df", q[0], q[1]))
	}
}

// What too few values give: no interval, rather than a made-up one.
func TestTooFew(t *testing.T) {
	var m Mean
	assert.True(t, math.IsNaN(m.Mean()))
	m.Add(1)
	assert.Equal(t, 1.0, m.Mean())
	lo, hi := m.Interval(0.95)
	assert.True(t, math.IsNaN(lo) && math.IsNaN(hi))
	var c Clustered
	c.Add("a", 1)
	c.Add("a", 0)
	assert.True(t, math.IsNaN(c.SE()), "one cluster: no clustered error")
	assert.Equal(t, 1.0, McNemar(0, 0))
}
