// Package median is the figure the benches report of several runs: the
// median, which one run disturbed by the machine moves least.
package median

import "sort"

// Of is the median of v, which it leaves as it is; v is not empty.
func Of(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
