package pool

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tasksOf makes the tasks of cases, as serve does from a request.
func tasksOf(cases []engine.Case) []*Task {
	tasks := make([]*Task, len(cases))
	for i, c := range cases {
		tasks[i] = NewTask(c, i+1, false)
	}
	return tasks
}

// resultsOf reads back what RunTasks yields.
func resultsOf(t *testing.T, p *Pool, ctx context.Context, tasks []*Task) []engine.Result {
	t.Helper()
	var out []engine.Result
	for batch := range p.RunTasks(ctx, tasks) {
		for _, tk := range batch {
			r, err := caseio.ParseResult(tk.Record.Line)
			require.NoError(t, err)
			out = append(out, r)
		}
	}
	return out
}

// TestRunTasks scores requests as serve sends them: one of more cases
// than the pool's window, and 200 of one case each at once, sharing the
// workers' batches. Every case gets its own result, in order.
func TestRunTasks(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", lengthMetric)
	p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 2})
	ctx := context.Background()

	big := lengthCases("big", p.window()+1500)
	checkLength(t, big, resultsOf(t, p, ctx, tasksOf(big)))

	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			one := lengthCases(fmt.Sprintf("one%d-", i), 1)
			checkLength(t, one, resultsOf(t, p, ctx, tasksOf(one)))
		})
	}
	wg.Wait()

	// A case that cannot cross (an input error) keeps its place.
	cases := lengthCases("mixed", 5)
	tasks := tasksOf(cases)
	tasks[2] = NewTask(engine.InvalidCase("bad", fmt.Errorf("not a case")), 3, false)
	got := resultsOf(t, p, ctx, tasks)
	require.Len(t, got, 5)
	assert.Equal(t, "bad", got[2].ID)
	require.NotNil(t, got[2].Err)
	assert.Equal(t, engine.KindInput, got[2].Err.Kind)
	checkLength(t, []engine.Case{cases[0], cases[1], cases[3], cases[4]}, []engine.Result{got[0], got[1], got[3], got[4]})
}

// TestRunTasksCancel ends a request's context while its cases are scored
// and queued (more than the window): every task still comes back once, in
// order; those not scored are canceled, and none is lost.
// (A case a worker finished before the cancel may follow a canceled one.)
func TestRunTasksCancel(t *testing.T) {
	metric := writeFile(t, t.TempDir(), "metric.py", `
import time
def score(input, output, expected=None):
    time.sleep(0.001)
    return 1.0, {"feedback": ""}
`)
	p := openPool(t, Options{Options: engine.Options{Metric: metric}, Processes: 2})
	cases := lengthCases("c", p.window()+500)
	tasks := tasksOf(cases)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []engine.Result
	for batch := range p.RunTasks(ctx, tasks) {
		for _, tk := range batch {
			r, err := caseio.ParseResult(tk.Record.Line)
			require.NoError(t, err)
			got = append(got, r)
			if len(got) == 50 {
				cancel()
			}
		}
	}
	require.Len(t, got, len(cases))
	scored, canceled := 0, 0
	for i, r := range got {
		require.Equal(t, cases[i].ID, r.ID, "result %d", i)
		switch {
		case r.Err == nil:
			scored++
		case r.Err.Kind == engine.KindCanceled:
			canceled++
		default:
			t.Fatalf("case %d: %v", i, r.Err)
		}
	}
	assert.GreaterOrEqual(t, scored, 50)
	assert.Greater(t, canceled, 0)

	// The pool still scores after it.
	one := lengthCases("after", 1)
	r := p.Score(context.Background(), one[0])
	assert.Nil(t, r.Err)
}
