package suggest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"workers", "workers", 0}, {"wokers", "workers", 1}, {"labl", "label", 1},
		{"answr", "answer", 1}, {"x", "id", 2}, {"", "abc", 3}, {"kitten", "sitting", 3},
	} {
		assert.Equal(t, tc.want, Distance(tc.a, tc.b), "%q %q", tc.a, tc.b)
		assert.Equal(t, tc.want, Distance(tc.b, tc.a), "symmetric: %q %q", tc.b, tc.a)
	}
}
