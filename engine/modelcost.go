package engine

// Model calls made from a case: the GIL released while one waits, and its
// cost added to the case's observation.

import (
	"context"

	"github.com/skynetml/skynet/llm"
)

// callModel makes an llm() call for case i of w's running batch, on the
// worker's thread with the GIL released. It is cut short by the caller's
// context and by the case's remaining time.
func (e *Engine) callModel(w *worker, i int, inRun bool, req llm.Request) (string, error) {
	ctx, remaining, role := context.Background(), e.timeout, llm.RoleMetric
	if inRun {
		remaining, role = e.runTimeout, llm.RoleTask
	}
	var job *scoreJob
	w.mu.Lock()
	if br := w.run; br != nil && i < len(br.jobs) {
		job = br.jobs[i]
		if job.ctx != nil {
			ctx = job.ctx
		}
		if cur, running := br.b.Current(); cur == i {
			remaining -= running
		}
	}
	w.mu.Unlock()
	// The call may outlive the case by a little, so that the watchdog (not
	// the model call's own deadline) decides that the case timed out.
	ctx, cancel := context.WithTimeout(ctx, remaining+modelCallSlack)
	defer cancel()
	reply, err := e.llm.Call(ctx, role, req)
	if inRun && job != nil {
		job.account(reply, err)
	}
	return reply.Text, err
}

// account adds a task-model call made by run to the case's observation:
// this worker's thread is the only one touching it while the case runs.
// A call without a price leaves the case's cost not measured.
func (j *scoreJob) account(r llm.Reply, err error) {
	o := &j.obs
	if o.ModelCalls != nil {
		*o.ModelCalls++
	}
	if err != nil {
		return
	}
	if o.InputTokens != nil {
		*o.InputTokens += r.InputTokens
		*o.OutputTokens += r.OutputTokens
	}
	if r.CostUSD == nil {
		o.CostUSD = nil
	} else if o.CostUSD != nil {
		*o.CostUSD += *r.CostUSD
	}
}
