package pool

import (
	"encoding/json"
	"testing"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// LineTask is the one place a case-file line becomes a task, for skynet
// score and skynet serve: the id is read quickly and the line crosses as it
// is; a line plainly bad gets its input error here, named by its line.
func TestLineTask(t *testing.T) {
	raw := []byte(`{"id": "q1", "input": 1, "output": "a"}`)
	task := LineTask(raw, 3, nil, false)
	assert.Equal(t, "q1", task.ID)
	assert.Equal(t, 3, task.Line)
	assert.Equal(t, raw, task.Case, "the line crosses unparsed")
	assert.Nil(t, task.Result)

	noID := LineTask([]byte(`{"input": 1, "output": "a"}`), 7, nil, false)
	assert.Equal(t, "7", noID.ID, "a case without an id is named by its line")
	assert.Nil(t, noID.Result)

	bad := LineTask([]byte(`{"input": 1`), 9, nil, false)
	assert.Equal(t, "9", bad.ID)
	assert.Nil(t, bad.Case)
	require.NotNil(t, bad.Result)
	assert.Equal(t, engine.KindInput, bad.Result.Err.Kind)
	assert.Contains(t, bad.Result.Err.Error(), "line 9")

	// What only a full parse finds is the worker's to say (QuickID reads less).
	noOutput := LineTask([]byte(`{"id": "x", "input": 1}`), 2, nil, false)
	assert.Equal(t, "x", noOutput.ID)
	assert.Nil(t, noOutput.Result)

	long := &caseio.LineError{Line: 4, Msg: "longer than the limit"}
	tooLong := LineTask(nil, 4, long, false)
	assert.Equal(t, "4", tooLong.ID)
	require.NotNil(t, tooLong.Result)
	assert.Equal(t, long.Error(), tooLong.Result.Feedback)

	prog := LineTask([]byte(`{"id": "p", "input": {"q": 1}}`), 5, nil, true)
	assert.Equal(t, "p", prog.ID)
	assert.Nil(t, prog.Result, "a program's case may come without an output")
	c, err := caseio.ParseCase(prog.Case, 5)
	require.NoError(t, err)
	assert.Equal(t, json.RawMessage("null"), c.Output, "run makes the output")
}
