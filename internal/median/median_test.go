package median

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOf(t *testing.T) {
	v := []float64{3, 1, 2}
	assert.Equal(t, 2.0, Of(v))
	assert.Equal(t, []float64{3, 1, 2}, v, "left as it was")
	assert.Equal(t, 2.5, Of([]float64{4, 1, 3, 2}))
	assert.Equal(t, 7.0, Of([]float64{7}))
}
