package serve

// POST /v1/rewards: OpenRLHF's remote reward model protocol
// (--reward.remote_url; --remote_rm_url in older releases), so a PPO/GRPO run can use a metric.py as its reward.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/pool"
)

// rewardsRequest is OpenRLHF's body: query[i] is prompt i and its
// completion; labels, when given, the references.
type rewardsRequest struct {
	Query   []json.RawMessage `json:"query"`
	Prompts []json.RawMessage `json:"prompts"`
	Labels  []json.RawMessage `json:"labels"`
}

// rewardsReply is what OpenRLHF reads: rewards, scores and extra_logs,
// whose every value it turns into a tensor (torch.tensor([value]) in
// samples_generator.py), so extra_logs holds numbers only. Each case's
// feedback and error kind sit beside them, for other clients and people.
type rewardsReply struct {
	Rewards   []floatJSON `json:"rewards"`
	Scores    []floatJSON `json:"scores"`
	ExtraLogs extraLogs   `json:"extra_logs"`
	Feedback  []string    `json:"feedback"`
	Errors    []*string   `json:"errors"` // a failed case's kind, else null
}

type extraLogs struct {
	Failed []floatJSON `json:"failed"` // 1.0 for a case whose score call failed (its reward is 0.0), else 0.0
}

// floatJSON is a number written with a fraction or an exponent, 1.0 and
// never 1, as Python's json writes a float: OpenRLHF makes a tensor of the
// rewards, and torch.tensor of whole numbers read as ints is an int64
// tensor whose std() raises, stopping every GRPO-style estimator.
type floatJSON float64

func (f floatJSON) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(float64(f))
	if err == nil && !bytes.ContainsAny(b, ".eE") {
		b = append(b, '.', '0')
	}
	return b, err
}

// rewardCase is case i of a rewards request as a case-file line.
type rewardCase struct {
	ID       string          `json:"id"`
	Input    rewardInput     `json:"input"`
	Output   string          `json:"output"`
	Expected json.RawMessage `json:"expected,omitempty"`
}

type rewardInput struct {
	Prompt string `json:"prompt"`
}

// rewardCases maps the request to cases: input {"prompt": prompts[i]},
// output query[i] less its prompts[i] prefix (all of it when it does not
// start with it), expected {"label": labels[i]} when labels are given.
func rewardCases(body []byte) ([]*pool.Task, error) {
	var req rewardsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, badRequest(`the body is not a JSON object {"query": [...], "prompts": [...], "labels": [...]}: %v`, err)
	}
	if req.Query == nil {
		return nil, badRequest(`"query" is missing: the body is {"query": [...], "prompts": [...], "labels": [...]}`)
	}
	n := len(req.Query)
	if req.Prompts != nil && len(req.Prompts) != n {
		return nil, badRequest(`"prompts" has %d items and "query" %d: they must be as many`, len(req.Prompts), n)
	}
	if req.Labels != nil && len(req.Labels) != n {
		return nil, badRequest(`"labels" has %d items and "query" %d: they must be as many`, len(req.Labels), n)
	}
	str := func(field string, i int, raw json.RawMessage) (string, error) {
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", badRequest("%s[%d] must be a string, got %s", field, i, abbrev(raw))
		}
		return v, nil
	}
	tasks := make([]*pool.Task, n)
	for i, q := range req.Query {
		query, err := str("query", i, q)
		if err != nil {
			return nil, err
		}
		c := rewardCase{ID: strconv.Itoa(i), Output: query}
		if req.Prompts != nil {
			if c.Input.Prompt, err = str("prompts", i, req.Prompts[i]); err != nil {
				return nil, err
			}
			c.Output = strings.TrimPrefix(query, c.Input.Prompt)
		}
		if req.Labels != nil {
			c.Expected, _ = json.Marshal(struct {
				Label json.RawMessage `json:"label"`
			}{req.Labels[i]})
		}
		line, err := json.Marshal(c)
		if err != nil {
			return nil, badRequest("case %d: %v", i, err)
		}
		tasks[i] = &pool.Task{ID: c.ID, Line: i + 1, Case: line}
	}
	return tasks, nil
}

// abbrev is a JSON value for a message, cut short when long.
func abbrev(raw json.RawMessage) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}

// rewards is POST /v1/rewards.
func (s *Server) rewards(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	tasks, err := rewardCases(body)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if !s.admit(w, len(tasks)) {
		return
	}
	reply := rewardsReply{
		Rewards: make([]floatJSON, 0, len(tasks)), Scores: make([]floatJSON, 0, len(tasks)),
		ExtraLogs: extraLogs{Failed: make([]floatJSON, 0, len(tasks))},
		Feedback:  make([]string, 0, len(tasks)), Errors: make([]*string, 0, len(tasks)),
	}
	for batch := range s.p.Load().RunTasks(r.Context(), tasks) {
		for _, t := range batch {
			res, err := caseio.ParseResult(t.Record.Line)
			if err != nil { // a line the pool wrote: not expected
				res = engine.Result{Err: &engine.CaseError{Kind: t.Record.Kind, Message: err.Error()}}
			}
			var kind *string
			score, feedback := res.Score, res.Feedback
			if res.Err != nil {
				k := string(res.Err.Kind)
				kind, score = &k, 0
				if feedback == "" {
					feedback = res.Err.Message
				}
			}
			reply.Rewards = append(reply.Rewards, floatJSON(score))
			reply.Scores = append(reply.Scores, floatJSON(score))
			failed := floatJSON(0)
			if kind != nil {
				failed = 1
			}
			reply.ExtraLogs.Failed = append(reply.ExtraLogs.Failed, failed)
			reply.Feedback = append(reply.Feedback, feedback)
			reply.Errors = append(reply.Errors, kind)
		}
		s.m.results(batch)
		s.inflight.Add(-int64(len(batch)))
	}
	b, err := json.Marshal(reply)
	if err != nil { // a score JSON cannot hold (NaN) is a contract error, not a score
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}
