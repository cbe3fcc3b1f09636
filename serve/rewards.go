package serve

// POST /v1/rewards: OpenRLHF's remote reward model protocol
// (--reward.remote_url; --remote_rm_url in older releases), so a PPO/GRPO run can use a metric.py as its reward.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/pool"
)

// The reply is what OpenRLHF reads: rewards, scores and extra_logs, whose
// every value it turns into a tensor (torch.tensor([value]) in
// samples_generator.py), so extra_logs holds numbers only, and a number is
// written with a fraction or an exponent, 1.0 and never 1, as Python's json
// writes a float (torch.tensor of whole numbers read as ints is an int64
// tensor whose std() raises, stopping every GRPO-style estimator). Each
// case's feedback and error kind sit beside them, for other clients and
// people:
//
//	{"rewards": [1.0, 0.0], "scores": [1.0, 0.0], "extra_logs": {"failed": [0.0, 1.0]},
//	 "feedback": ["Correct.", "ValueError: ..."], "errors": [null, "exception"]}

// rewardCases maps OpenRLHF's body, {"query": [...], "prompts": [...],
// "labels": [...]} (query[i] is prompt i and its completion; labels, when
// given, the references), to tasks: input {"prompt": prompts[i]}, output
// query[i] less its prompts[i] prefix (all of it when it does not start
// with it), expected {"label": labels[i]} when labels are given. The body is
// read in one pass (cpython.SplitObject validates it) and each case line is
// put together from the request's own JSON text, in one buffer.
func rewardCases(body []byte) ([]*pool.Task, error) {
	members, err := cpython.SplitObject(body, nil)
	if err != nil {
		return nil, badRequest(`the body is not a JSON object {"query": [...], "prompts": [...], "labels": [...]}: %v`, err)
	}
	var query, prompts, labels [][]byte
	for _, m := range members {
		var dst *[][]byte
		switch m.Key {
		case "query":
			dst = &query
		case "prompts":
			dst = &prompts
		case "labels":
			dst = &labels
		default:
			continue // OpenRLHF may send more; they are not the metric's
		}
		if string(m.Value) == "null" {
			continue // as if left out: OpenRLHF sends "labels": null without references
		}
		elems, ok := caseio.SplitArray(m.Value, [][]byte{})
		if !ok {
			return nil, badRequest("%q must be an array, got %s", m.Key, abbrev(m.Value))
		}
		*dst = elems
	}
	if query == nil {
		return nil, badRequest(`"query" is missing: the body is {"query": [...], "prompts": [...], "labels": [...]}`)
	}
	n := len(query)
	if prompts != nil && len(prompts) != n {
		return nil, badRequest(`"prompts" has %d items and "query" %d: they must be as many`, len(prompts), n)
	}
	if labels != nil && len(labels) != n {
		return nil, badRequest(`"labels" has %d items and "query" %d: they must be as many`, len(labels), n)
	}
	size := 0
	for i, q := range query {
		size += 64 + len(q)
		if prompts != nil {
			size += len(prompts[i])
		}
		if labels != nil {
			size += len(labels[i])
		}
	}
	lines := make([]byte, 0, size)
	// The ids, "0" to "n-1": one string, each task's id a slice of it.
	var idBuf []byte
	ends := make([]int, n)
	for i := range ends {
		idBuf = strconv.AppendInt(idBuf, int64(i), 10)
		ends[i] = len(idBuf)
	}
	ids := string(idBuf)
	tasks := make([]*pool.Task, n)
	slots := make([]pool.Task, n)
	for i, q := range query {
		if q[0] != '"' {
			return nil, badRequest("query[%d] must be a string, got %s", i, abbrev(q))
		}
		at := len(lines)
		lines = append(lines, `{"id":"`...)
		lines = strconv.AppendInt(lines, int64(i), 10) // the task's id
		lines = append(lines, `","input":{"prompt":`...)
		output := q
		if prompts != nil {
			p := prompts[i]
			if p[0] != '"' {
				return nil, badRequest("prompts[%d] must be a string, got %s", i, abbrev(p))
			}
			lines = append(lines, p...)
			output = nil
		} else {
			lines = append(lines, `""`...) // no prompts: each is ""
		}
		lines = append(lines, `},"output":`...)
		if output == nil {
			lines = appendCompletion(lines, q, prompts[i])
		} else {
			lines = append(lines, output...)
		}
		if labels != nil {
			lines = append(lines, `,"expected":{"label":`...)
			lines = append(lines, labels[i]...)
			lines = append(lines, '}')
		}
		lines = append(lines, '}')
		id := ids[:ends[i]]
		if i > 0 {
			id = ids[ends[i-1]:ends[i]]
		}
		slots[i] = pool.Task{ID: id, Line: i + 1, Case: lines[at:len(lines):len(lines)]}
		tasks[i] = &slots[i]
	}
	return tasks, nil
}

// appendCompletion writes query (a JSON string's text) less its prompt
// prefix, as a JSON string's text: compared as the request wrote them, which
// a prefix of the decoded strings always is when both were written alike
// (one encoder, one body); else decoded, compared and written again.
func appendCompletion(b, query, prompt []byte) []byte {
	p := prompt[1 : len(prompt)-1] // the text between the quotes
	if bytes.HasPrefix(query[1:], p) {
		return append(append(b, '"'), query[1+len(p):]...)
	}
	var q, pr string
	if json.Unmarshal(query, &q) != nil || json.Unmarshal(prompt, &pr) != nil || !strings.HasPrefix(q, pr) {
		return append(b, query...)
	}
	return caseio.AppendString(b, q[len(pr):])
}

// abbrev is a JSON value for a message, cut short when long.
func abbrev(raw []byte) string {
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
	// Each case's score and error kind, and its feedback as the worker
	// wrote it in its results line, copied whole into the reply.
	n := len(tasks)
	scores := make([]float64, 0, n)
	kinds := make([]string, 0, n)
	feedback := make([]byte, 0, 16*n)
	for batch := range s.p.Load().RunTasks(r.Context(), tasks) {
		for _, t := range batch {
			rec := &t.Record
			score, kind := rec.Score, string(rec.Kind)
			fb, ok := caseio.ResultFeedback(rec.Line)
			if kind != "" {
				score = 0
				if !ok || len(fb) == 2 { // no feedback: the error's message says what happened
					fb, ok = errorMessage(rec), true
				}
			}
			if !ok {
				fb = []byte(`""`)
			}
			scores, kinds = append(scores, score), append(kinds, kind)
			feedback = append(append(feedback, fb...), ',')
		}
		s.m.results(batch)
		s.inflight.Add(-int64(len(batch)))
	}
	for _, v := range scores {
		if math.IsNaN(v) || math.IsInf(v, 0) { // the contract refuses them: not a score to send
			fail(w, http.StatusInternalServerError, fmt.Sprintf("json: unsupported value: %v", v))
			return
		}
	}
	b := make([]byte, 0, 64+n*24+len(feedback))
	b = append(b, `{"rewards":[`...)
	b = appendFloats(b, scores, nil)
	b = append(b, `],"scores":[`...)
	b = appendFloats(b, scores, nil)
	b = append(b, `],"extra_logs":{"failed":[`...)
	b = appendFloats(b, nil, kinds)
	b = append(b, `]},"feedback":[`...)
	b = append(b, bytes.TrimSuffix(feedback, []byte{','})...)
	b = append(b, `],"errors":[`...)
	for i, k := range kinds {
		if i > 0 {
			b = append(b, ',')
		}
		if k == "" {
			b = append(b, "null"...)
		} else {
			b = caseio.AppendString(b, k)
		}
	}
	b = append(b, "]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// appendFloats writes vs as the items of a JSON array, each with a
// fraction (1.0); with kinds instead, 1.0 for each case that failed, 0.0
// for the others.
func appendFloats(b []byte, vs []float64, kinds []string) []byte {
	for i := range max(len(vs), len(kinds)) {
		if i > 0 {
			b = append(b, ',')
		}
		switch {
		case vs != nil:
			b = caseio.AppendFloat(b, vs[i], true)
		case kinds[i] != "":
			b = append(b, "1.0"...)
		default:
			b = append(b, "0.0"...)
		}
	}
	return b
}

// errorMessage is the message of a failed case's results line, as a JSON string.
func errorMessage(rec *pool.Record) []byte {
	res, err := caseio.ParseResult(rec.Line)
	msg := string(rec.Kind)
	switch {
	case err != nil:
		msg = err.Error()
	case res.Err != nil:
		msg = res.Err.Message
	}
	return caseio.AppendString(nil, msg)
}
