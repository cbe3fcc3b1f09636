package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
)

// runMerge is skynet merge: the shards' results files into one, in the
// cases' order, once it has checked that every case has exactly one
// finished result across the parts.
func runMerge(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	data := fs.String("data", "", "the cases the parts were scored from: skynet score's case file, or with --eval skynet eval's dataset")
	out := fs.String("out", "", "merged results file (JSONL); default standard output")
	eval := fs.Bool("eval", false, "--data is skynet eval's dataset (a .jsonl or .csv file or a directory), read as eval reads it")
	split := fs.String("split", "", "with --eval: the split the parts evaluated")
	maxLine := fs.Int("max-line-bytes", caseio.DefaultMaxLineBytes, "longest line read")
	if code, ok := parseFlagsArgs(fs, args, stdout, stderr); !ok {
		return code
	}
	parts := fs.Args()
	if !required(stderr, "merge", "data", *data) {
		return exitUsage
	}
	if len(parts) == 0 {
		fmt.Fprintln(stderr, "skynet merge: name the parts to merge: skynet merge --data CASES --out RESULTS.jsonl PART...")
		return exitUsage
	}
	if err := samePartTwice(parts); err != nil {
		fmt.Fprintf(stderr, "skynet merge: %v\n", err)
		return exitUsage
	}
	made, err := partsIdentity(parts)
	if err != nil {
		fmt.Fprintf(stderr, "skynet merge: %v\n", err)
		return exitUsage
	}
	if st, err := os.Stat(*data); !*eval && (err == nil && st.IsDir() || strings.EqualFold(filepath.Ext(*data), ".csv")) {
		fmt.Fprintf(stderr, "skynet merge: --data %s is a dataset: pass --eval (and --split S if the shards ran with one)\n", *data)
		return exitUsage
	}
	inputs := []inputFile{{"data", *data, "the case file"}}
	for _, p := range parts {
		inputs = append(inputs, inputFile{"", p, "the part"})
	}
	if err := refuseOverwrite(*out, inputs); *out != "" && err != nil {
		fmt.Fprintf(stderr, "skynet merge: %v\n", err)
		return exitUsage
	}
	ids, rows, err := mergeIDs(*data, *eval, *split, *maxLine)
	if err != nil {
		fmt.Fprintf(stderr, "skynet merge: %v\n", err)
		return exitUsage
	}
	m := merger{want: map[string]bool{}, got: map[string]partLine{}}
	for _, id := range ids {
		m.want[id] = true
	}
	for _, p := range parts {
		if err := m.read(p, *maxLine); err != nil {
			fmt.Fprintf(stderr, "skynet merge: %v\n", err)
			return exitUsage
		}
	}
	missing := m.missing(ids)
	if rows && (len(m.foreign) > 0 || len(missing) > 0) {
		// The ids read from a dataset's rows are not eval's: the lists
		// would be a false diagnosis.
		fmt.Fprintf(stderr, "skynet merge: --data %s holds dataset rows, not cases: pass --eval (and --split S if the shards ran with one)\n", *data)
		return exitUsage
	}
	var onlySplit string
	if *eval && *split == "" && len(missing) > 0 {
		onlySplit = m.onlySplit(*data, missing)
	}
	if m.report(stderr, *data, missing, onlySplit) {
		return exitCheck
	}
	var w io.Writer = stdout
	summary := stderr
	if *out != "" {
		f, err := os.Create(*out)
		if err == nil && made != nil {
			err = writeIdentity(*out, *made)
		}
		if err != nil {
			fmt.Fprintf(stderr, "skynet merge: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		w, summary = f, stdout
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	st := newSummary()
	for _, id := range ids {
		g := m.got[id]
		bw.Write(g.text)
		bw.WriteByte('\n')
		st.add(g.tally)
		for k, v := range g.scores {
			st.addScore([]byte(k), v)
		}
	}
	if err := bw.Flush(); err != nil {
		fmt.Fprintf(stderr, "skynet merge: writing %s: %v\n", *out, err)
		return exitUsage
	}
	st.parts = len(parts)
	st.print(summary, false)
	if st.errors[engine.KindCrash] > 0 {
		return exitCheck // as skynet score does
	}
	return exitOK
}

// mergeIDs are the cases' ids in order, as score or eval named them; rows
// says a case file (not --eval) looks like a dataset's rows, not cases.
func mergeIDs(data string, eval bool, split string, maxLine int) (ids []string, rows bool, err error) {
	if eval {
		ids, err := datasetIDs(data, split)
		return ids, false, err
	}
	f, err := os.Open(data)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	cr := caseio.NewReader(f)
	cr.MaxLineBytes = maxLine
	seen := newIDSet(0)
	for {
		line, err := cr.NextLine()
		if err == io.EOF {
			return ids, rows, nil
		}
		le, bad := err.(*caseio.LineError)
		if err != nil && !bad {
			return nil, false, fmt.Errorf("%s: %w", data, err)
		}
		n := cr.Line()
		if !bad && (len(ids) == 0 && line[0] != '{' || len(ids) < rowLikeLines && looksLikeRow(line)) {
			rows = true
		}
		var lineErr error
		if bad {
			lineErr = le
		}
		id := caseio.LineID(line, n, lineErr)
		if prev, dup := seen.add(id, n); dup {
			return nil, false, fmt.Errorf("%s: %w", data, &duplicateIDError{id: id, line: n, prev: prev, what: "line"})
		}
		ids = append(ids, id)
	}
}

// partsIdentity is what made the parts, as their OUT.meta.json say (nil
// when none says); parts made by different metrics (or programs,
// artifacts) are refused: their scores are not one run's.
func partsIdentity(parts []string) (*runIdentity, error) {
	var made *runIdentity
	var from string
	for _, p := range parts {
		id, ok, err := readIdentity(p)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if made != nil && !made.same(id) {
			return nil, fmt.Errorf("the parts were made by different runs: %s by %s, %s by %s; merge the parts of one run", from, made, p, id)
		}
		if made == nil {
			made, from = &id, p
		}
	}
	return made, nil
}

// datasetIDs are the ids of a dataset's cases (of one split), in order.
func datasetIDs(data, split string) ([]string, error) {
	cases, err := caseio.Dataset{Path: data, Split: split}.Cases()
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = c.ID
	}
	return ids, nil
}

// samePartTwice refuses a part named twice (through any path or link):
// its every result would read as a case with two results.
func samePartTwice(parts []string) error {
	seen := make([]os.FileInfo, len(parts))
	for i, p := range parts {
		fi, err := os.Stat(p)
		if err != nil {
			continue // reading it says why
		}
		for j, prev := range seen[:i] {
			if prev != nil && os.SameFile(prev, fi) {
				if parts[j] == p {
					return fmt.Errorf("the part %s is named twice: name each part once", p)
				}
				return fmt.Errorf("the parts %s and %s are the same file: name each part once", parts[j], p)
			}
		}
		seen[i] = fi
	}
	return nil
}

// partLine is one result of a part.
type partLine struct {
	part   string
	line   int
	text   []byte
	tally  tally
	scores map[string]float64
}

func (p partLine) where() string { return p.part + ":" + strconv.Itoa(p.line) }

type merger struct {
	want         map[string]bool
	got          map[string]partLine
	dups         []string
	foreign      []string
	cancelled    []string
	cancelledIDs map[string]bool
}

// read takes in one part: every line a finished result, each id once.
func (m *merger) read(part string, maxLine int) error {
	f, err := os.Open(part)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), maxLine+1)
	for n := 1; sc.Scan(); n++ {
		text := sc.Bytes()
		if len(strings.TrimSpace(string(text))) == 0 {
			continue
		}
		id, t, scores, ok := parseResult(text)
		if !ok {
			return fmt.Errorf("%s:%d: not a result line (a shard stopped mid-write? run it again with --resume, which drops a torn line): %.80q", part, n, text)
		}
		p := partLine{part: part, line: n, text: append([]byte(nil), text...), scores: scores, tally: t}
		switch {
		case !m.want[id]:
			m.foreign = append(m.foreign, fmt.Sprintf("%q (%s)", id, p.where()))
		case p.tally.kind == engine.KindCanceled:
			m.cancelled = append(m.cancelled, fmt.Sprintf("%q (%s)", id, p.where()))
			if m.cancelledIDs == nil {
				m.cancelledIDs = map[string]bool{}
			}
			m.cancelledIDs[id] = true
		default:
			if prev, ok := m.got[id]; ok {
				m.dups = append(m.dups, fmt.Sprintf("%q in %s and %s", id, prev.where(), p.where()))
				continue
			}
			m.got[id] = p
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", part, err)
	}
	return nil
}

// parseResult reads one results line with caseio.ParseResult, the reader
// of every results line: its id, what the summary counts of it and its
// named scores; !ok for a line that is not a result (torn by a crash, or
// another file's: no id).
func parseResult(text []byte) (id string, t tally, scores map[string]float64, ok bool) {
	r, err := caseio.ParseResult(text)
	if err != nil || r.ID == "" {
		return "", tally{}, nil, false
	}
	return r.ID, tallyOf(r), r.Scores, true
}

// missing are the cases of ids without a result, finished or cancelled.
func (m *merger) missing(ids []string) []string {
	var missing []string
	for _, id := range ids {
		if _, ok := m.got[id]; !ok && !m.cancelledIDs[id] {
			missing = append(missing, id)
		}
	}
	return missing
}

// onlySplit is the split of data that holds every id of the parts while
// none of the missing cases is in it: the parts ran with --split and the
// merge without it. "" when there is no such split.
func (m *merger) onlySplit(data string, missing []string) string {
	splits, err := caseio.Dataset{Path: data}.Splits()
	if err != nil || len(m.got)+len(m.cancelledIDs) == 0 {
		return ""
	}
	for _, s := range splits {
		ids, err := datasetIDs(data, s)
		if err != nil {
			continue
		}
		in := make(map[string]bool, len(ids))
		for _, id := range ids {
			in[id] = true
		}
		holds := true
		for id := range m.got {
			holds = holds && in[id]
		}
		for id := range m.cancelledIDs {
			holds = holds && in[id]
		}
		for _, id := range missing {
			holds = holds && !in[id]
		}
		if holds {
			return s
		}
	}
	return ""
}

// report says what keeps the parts from making the whole, if anything;
// with onlySplit, the missing cases are that the merge lacks --split.
func (m *merger) report(w io.Writer, data string, missingIDs []string, onlySplit string) (failed bool) {
	missing := make([]string, len(missingIDs))
	for i, id := range missingIDs {
		missing[i] = strconv.Quote(id)
	}
	list := func(what string, items []string, hint string) {
		if len(items) == 0 {
			return
		}
		failed = true
		shown := items[:min(len(items), 10)]
		more := ""
		if len(items) > len(shown) {
			more = fmt.Sprintf(", and %d more", len(items)-len(shown))
		}
		fmt.Fprintf(w, "skynet merge: %d %s: %s%s%s\n", len(items), what, strings.Join(shown, ", "), more, hint)
	}
	list("case(s) with two results", m.dups, " (the same shard given twice, or shards of different --shard counts?)")
	list("result(s) for cases not in "+data, m.foreign, " (parts of another dataset?)")
	list("cancelled result(s)", m.cancelled, " (an interrupted shard: run it again with --resume)")
	if onlySplit != "" {
		fmt.Fprintf(w, "skynet merge: the parts hold only split %q's cases: pass --split %s\n", onlySplit, onlySplit)
		return true
	}
	list("case(s) without a result", missing, " (a shard missing from the parts, or not finished: run it again with --resume)")
	return failed
}
