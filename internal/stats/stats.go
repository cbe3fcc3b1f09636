// Package stats is the statistics of skynet's summary, compare and report:
// a mean with its standard error and a 95% interval (Student's t), the
// standard error clustered by a field, the paired difference of two runs
// on the same cases, and McNemar's exact test for 0/1 scores (Miller,
// "Adding Error Bars to Evals", 2024). The tests hold each to SciPy's and
// statsmodels' figures.
package stats

import (
	"math"
)

// Mean gathers values for their mean, standard error and interval, in one
// pass and constant memory (Welford's update, stable where sums of squares
// lose digits).
type Mean struct {
	n        int
	mean, m2 float64
}

// Add counts x.
func (m *Mean) Add(x float64) {
	m.n++
	d := x - m.mean
	m.mean += d / float64(m.n)
	m.m2 += d * (x - m.mean)
}

// N is how many values were added.
func (m Mean) N() int { return m.n }

// Mean is their mean (NaN of none).
func (m Mean) Mean() float64 {
	if m.n == 0 {
		return math.NaN()
	}
	return m.mean
}

// SD is their sample standard deviation (n-1 in the denominator; NaN under two).
func (m Mean) SD() float64 {
	if m.n < 2 {
		return math.NaN()
	}
	return math.Sqrt(m.m2 / float64(m.n-1))
}

// SE is the standard error of the mean, SD/sqrt(n).
func (m Mean) SE() float64 { return m.SD() / math.Sqrt(float64(m.n)) }

// Interval is the two-sided interval of the mean at level (0.95): mean ±
// t(df = n-1) × SE. NaN ends under two values.
func (m Mean) Interval(level float64) (lo, hi float64) {
	return interval(m.Mean(), m.SE(), float64(m.n-1), level)
}

func interval(mean, se, df, level float64) (lo, hi float64) {
	if df < 1 || math.IsNaN(se) {
		return math.NaN(), math.NaN()
	}
	h := TQuantile((1+level)/2, df) * se
	return mean - h, mean + h
}

// Clustered gathers values by cluster for the standard error of their mean
// when cases come in groups (several questions of one passage): what
// statsmodels gives for OLS on a constant with cov_type="cluster" (CR1,
// with its G/(G-1) and (N-1)/(N-K) factors; K = 1). Memory is a sum a cluster.
type Clustered struct {
	all   Mean
	index map[string]int
	sum   []float64 // by cluster: the sum of its values
	count []float64 // and how many
}

// Add counts x in cluster c.
func (c *Clustered) Add(cluster string, x float64) {
	if c.index == nil {
		c.index = map[string]int{}
	}
	i, ok := c.index[cluster]
	if !ok {
		i = len(c.sum)
		c.index[cluster] = i
		c.sum, c.count = append(c.sum, 0), append(c.count, 0)
	}
	c.sum[i] += x
	c.count[i]++
	c.all.Add(x)
}

// Clusters is how many clusters the values fell in.
func (c *Clustered) Clusters() int { return len(c.sum) }

// Mean is the mean of every value.
func (c *Clustered) Mean() float64 { return c.all.Mean() }

// SE is the cluster-robust standard error of the mean (NaN under two clusters).
func (c *Clustered) SE() float64 {
	g := float64(len(c.sum))
	if g < 2 {
		return math.NaN()
	}
	mean, n := c.all.Mean(), float64(c.all.N())
	var meat float64
	for i, s := range c.sum {
		u := s - c.count[i]*mean // the cluster's summed residuals
		meat += u * u
	}
	return math.Sqrt(g/(g-1)*meat) / n
}

// Interval is the interval of the mean at level with t(df = clusters-1).
func (c *Clustered) Interval(level float64) (lo, hi float64) {
	return interval(c.Mean(), c.SE(), float64(len(c.sum)-1), level)
}

// McNemar is the two-sided exact McNemar test's p-value for paired 0/1
// outcomes: b pairs went 1 -> 0, c went 0 -> 1; under no change each
// discordant pair goes either way with probability 1/2. As statsmodels'
// mcnemar(exact=True): min(1, 2 P(X <= min(b, c))), X ~ Binomial(b+c, 1/2).
func McNemar(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	return math.Min(1, 2*BinomialCDF(min(b, c), n, 0.5))
}

// BinomialCDF is P(X <= k) for X ~ Binomial(n, p).
func BinomialCDF(k, n int, p float64) float64 {
	switch {
	case k < 0:
		return 0
	case k >= n:
		return 1
	}
	return RegIncBeta(float64(n-k), float64(k+1), 1-p)
}

// TCDF is Student's t distribution's CDF with df degrees of freedom.
func TCDF(t, df float64) float64 {
	x := df / (df + t*t)
	tail := 0.5 * RegIncBeta(df/2, 0.5, x) // P(T > |t|)
	if t >= 0 {
		return 1 - tail
	}
	return tail
}

// TQuantile is the p quantile (0 < p < 1) of Student's t with df degrees
// of freedom: TCDF's inverse, found by bisection and Newton's steps to the
// last bits.
func TQuantile(p, df float64) float64 {
	if p <= 0 || p >= 1 || df <= 0 || math.IsNaN(p) || math.IsNaN(df) {
		return math.NaN()
	}
	if p == 0.5 {
		return 0
	}
	if p < 0.5 {
		return -TQuantile(1-p, df)
	}
	// Bracket, then bisect: the CDF is monotone.
	lo, hi := 0.0, 1.0
	for TCDF(hi, df) < p {
		lo, hi = hi, hi*2
		if hi > 1e300 {
			return math.Inf(1)
		}
	}
	for i := 0; i < 200 && hi-lo > 1e-15*hi; i++ {
		mid := (lo + hi) / 2
		if TCDF(mid, df) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	x := (lo + hi) / 2
	for range 3 { // Newton: the density at x is the slope
		f := TCDF(x, df) - p
		d := tDensity(x, df)
		if d <= 0 || f == 0 {
			break
		}
		x -= f / d
	}
	return x
}

func tDensity(t, df float64) float64 {
	lg1, _ := math.Lgamma((df + 1) / 2)
	lg2, _ := math.Lgamma(df / 2)
	return math.Exp(lg1 - lg2 - 0.5*math.Log(df*math.Pi) - (df+1)/2*math.Log1p(t*t/df))
}

// RegIncBeta is the regularized incomplete beta function I_x(a, b), by its
// continued fraction (modified Lentz), on the side of x where it converges
// fast.
func RegIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaFraction(a, b, x) / a
	}
	return 1 - front*betaFraction(b, a, 1-x)/b
}

func betaFraction(a, b, x float64) float64 {
	const tiny, eps = 1e-300, 1e-16
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	// step takes one term of the fraction into c and d, and returns the
	// factor it multiplies h by.
	step := func(num float64) float64 {
		d = 1 + num*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + num/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		return d * c
	}
	for m := 1; m < 100000; m++ {
		fm := float64(m)
		h *= step(fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm)))
		del := step(-(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1)))
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}
