package main

// skynet compare: two runs of one dataset (a prompt before and after, two
// metrics...), paired case by case. The difference of the means gets its
// interval from the paired differences (Miller 2024: a paired test on the
// same questions is far tighter than two independent intervals), 0/1 scores
// McNemar's exact test, and the cases that changed most are listed with
// both feedbacks. Reading is one pass over each file in constant memory a
// case; the feedbacks of the few cases listed are read again at the end.

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/skynetml/skynet/caseio"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/internal/stats"
)

// stringsFlag is a flag that may be given several times.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// compareFlags are skynet compare's flags.
type compareFlags struct {
	base, new    stringsFlag
	json         bool
	failIfWorse  bool
	show         int
	allowPartial bool
}

func runCompare(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	var f compareFlags
	fs.Var(&f.base, "base", "a results file of the base run (give it again for each part of a sharded or resumed run); or name BASE.jsonl first of the two arguments")
	fs.Var(&f.new, "new", "a results file of the new run (again for each part); or name NEW.jsonl second")
	fs.BoolVar(&f.json, "json", false, "print the comparison as JSON")
	fs.BoolVar(&f.failIfWorse, "fail-if-worse", false, "exit 1 when NEW is worse than BASE with 95% confidence (the interval of the difference lies below 0), for CI pipelines")
	fs.IntVar(&f.show, "show", 5, "how many cases that got worse (and better) to list, largest change first")
	fs.BoolVar(&f.allowPartial, "allow-partial", false, "compare even when the two runs share fewer than half the cases of the smaller (different datasets, most likely)")
	pos, code, ok := parseFlagsAnywhere(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	switch {
	case len(pos) == 2 && len(f.base) == 0 && len(f.new) == 0:
		f.base, f.new = stringsFlag{pos[0]}, stringsFlag{pos[1]}
	case len(pos) == 0 && len(f.base) > 0 && len(f.new) > 0:
	default:
		fmt.Fprintln(stderr, "skynet compare: name two results files, BASE.jsonl NEW.jsonl (or each side's parts with --base and --new)")
		return exitUsage
	}
	c, err := compareRuns(f)
	if err != nil {
		fmt.Fprintf(stderr, "skynet compare: %v\n", err)
		if f.json {
			json.NewEncoder(stdout).Encode(map[string]any{"ok": false, "error": err.Error()})
		}
		return exitUsage
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(c)
	} else {
		c.print(stdout)
	}
	if f.failIfWorse && c.Worse95 {
		fmt.Fprintf(stderr, "skynet compare: NEW is worse than BASE with 95%% confidence (difference %s, interval %s to %s)\n",
			signed(c.Diff.Mean), signed(c.Diff.Low), signed(c.Diff.High))
		return exitCheck
	}
	return exitOK
}

// sideResult is one case's result on one side, as compare keeps it.
type sideResult struct {
	score  float64
	kind   engine.ErrorKind
	file   int   // which of the side's files
	offset int64 // where its line starts, to read its feedback again
	named  []namedValue
}

type namedValue struct {
	name int32 // an index into the names seen
	v    float64
}

// baseTable is BASE's results by id, in memory the garbage collector need
// not scan (no pointers): ids in one byte arena, an open-addressed index of
// their hashes, named scores in one slice. A million results cost about
// 60 bytes each and one probe a lookup.
type baseTable struct {
	seed    maphash.Seed
	ids     []byte
	slots   []uint32 // entry index + 1; 0 is free; a power of two, at most half full
	entries []baseEntry
	named   []namedValue
	kinds   []engine.ErrorKind // kind index - 1 in baseEntry
}

type baseEntry struct {
	hash            uint64
	idAt, idLen     uint32
	namedAt, nNamed uint32
	score           float64
	offset          int64
	file, kind      uint16
	seen            bool // NEW has it
}

func newBaseTable() *baseTable {
	return &baseTable{seed: maphash.MakeSeed(), slots: make([]uint32, 1024)}
}

// find is id's entry, or the free slot where it goes (entry nil).
func (t *baseTable) find(id string) (slot int, e *baseEntry, h uint64) {
	h = maphash.String(t.seed, id)
	mask := len(t.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		k := t.slots[i]
		if k == 0 {
			return i, nil, h
		}
		if e := &t.entries[k-1]; e.hash == h && string(t.ids[e.idAt:e.idAt+e.idLen]) == id {
			return i, e, h
		}
	}
}

// add keeps r as id's; false when id is there already.
func (t *baseTable) add(id string, r sideResult) bool {
	slot, e, h := t.find(id)
	if e != nil {
		return false
	}
	k := uint16(0)
	if r.kind != "" {
		k = uint16(slices.Index(t.kinds, r.kind) + 1)
		if k == 0 {
			t.kinds = append(t.kinds, r.kind)
			k = uint16(len(t.kinds))
		}
	}
	t.entries = append(t.entries, baseEntry{hash: h, idAt: uint32(len(t.ids)), idLen: uint32(len(id)),
		namedAt: uint32(len(t.named)), nNamed: uint32(len(r.named)), score: r.score, offset: r.offset, file: uint16(r.file), kind: k})
	t.ids = append(t.ids, id...)
	t.named = append(t.named, r.named...)
	t.slots[slot] = uint32(len(t.entries))
	if 2*len(t.entries) > len(t.slots) {
		t.grow()
	}
	return true
}

func (t *baseTable) grow() {
	t.slots = make([]uint32, 2*len(t.slots))
	mask := len(t.slots) - 1
	for k, e := range t.entries {
		i := int(e.hash) & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = uint32(k + 1)
	}
}

// result is an entry as a sideResult.
func (t *baseTable) result(e *baseEntry) sideResult {
	r := sideResult{score: e.score, file: int(e.file), offset: e.offset, named: t.named[e.namedAt : e.namedAt+e.nNamed]}
	if e.kind > 0 {
		r.kind = t.kinds[e.kind-1]
	}
	return r
}

func (t *baseTable) id(e *baseEntry) string { return string(t.ids[e.idAt : e.idAt+e.idLen]) }

// comparison is what compare finds, as --json prints it.
type comparison struct {
	Base     sideJSON                `json:"base"`
	New      sideJSON                `json:"new"`
	Paired   int                     `json:"paired"`
	OnlyBase idsJSON                 `json:"only_in_base"`
	OnlyNew  idsJSON                 `json:"only_in_new"`
	Diff     diffJSON                `json:"difference"`
	McNemar  *mcnemarJSON            `json:"mcnemar,omitempty"`
	Named    map[string]diffJSON     `json:"named_scores,omitempty"`
	Worse    []changedCase           `json:"worse"`
	Better   []changedCase           `json:"better"`
	Worse95  bool                    `json:"worse_with_95_confidence"`
	Better95 bool                    `json:"better_with_95_confidence"`
	Errors   map[string]errorsChange `json:"errors"` // by kind, among the paired cases
}

type sideJSON struct {
	Files   []string `json:"files"`
	Results int      `json:"results"`
	Mean    float64  `json:"mean"` // over the paired cases
}

type idsJSON struct {
	Count int      `json:"count"`
	First []string `json:"first"`
}

type diffJSON struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"` // NEW - BASE
	SE   float64 `json:"se"`
	Low  float64 `json:"ci95_low"`
	High float64 `json:"ci95_high"`
}

type mcnemarJSON struct {
	Worse  int     `json:"worse"`  // 1 -> 0
	Better int     `json:"better"` // 0 -> 1
	P      float64 `json:"p"`
}

type errorsChange struct {
	Base int `json:"base"`
	New  int `json:"new"`
}

// changedCase is a case whose score changed, with both feedbacks.
type changedCase struct {
	ID           string  `json:"id"`
	Base         float64 `json:"base"`
	New          float64 `json:"new"`
	Diff         float64 `json:"diff"`
	BaseFeedback string  `json:"base_feedback"`
	NewFeedback  string  `json:"new_feedback"`
	BaseError    string  `json:"base_error,omitempty"`
	NewError     string  `json:"new_error,omitempty"`
	baseAt       sideResult
	newAt        sideResult
}

func (d diffJSON) MarshalJSON() ([]byte, error) {
	type plain diffJSON
	p := plain(d)
	for _, v := range []*float64{&p.SE, &p.Low, &p.High} {
		if math.IsNaN(*v) {
			*v = 0 // JSON has no NaN; N < 2 says there is no interval
		}
	}
	return json.Marshal(p)
}

// compareRuns reads both sides and pairs them.
func compareRuns(f compareFlags) (*comparison, error) {
	var names namesSeen
	base := newBaseTable()
	baseFiles := []string(f.base)
	if err := readSide(baseFiles, &names, func(id string, r sideResult, where lineAt) error {
		if !base.add(id, r) {
			return fmt.Errorf("%s: case %q has a second result in BASE (merge a run's parts first, or name each part once)", where, id)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	c := &comparison{Base: sideJSON{Files: baseFiles, Results: len(base.entries)}, New: sideJSON{Files: f.new},
		Named: map[string]diffJSON{}, Errors: map[string]errorsChange{}}
	var diff, baseMean, newMean stats.Mean
	named := map[int32]*stats.Mean{}
	onlyNew := map[string]bool{}
	binary := true
	b01, c01 := 0, 0
	worse := newTopChanges(f.show, true)
	better := newTopChanges(f.show, false)
	if err := readSide(f.new, &names, func(id string, r sideResult, where lineAt) error {
		_, e, _ := base.find(id)
		if e == nil {
			if onlyNew[id] {
				return fmt.Errorf("%s: case %q has a second result in NEW (merge a run's parts first, or name each part once)", where, id)
			}
			onlyNew[id] = true
			c.New.Results++
			c.OnlyNew.add(id)
			return nil
		}
		if e.seen {
			return fmt.Errorf("%s: case %q has a second result in NEW (merge a run's parts first, or name each part once)", where, id)
		}
		e.seen = true
		c.New.Results++
		b := base.result(e)
		d := r.score - b.score
		diff.Add(d)
		baseMean.Add(b.score)
		newMean.Add(r.score)
		if b.kind != "" {
			ec := c.Errors[string(b.kind)]
			ec.Base++
			c.Errors[string(b.kind)] = ec
		}
		if r.kind != "" {
			ec := c.Errors[string(r.kind)]
			ec.New++
			c.Errors[string(r.kind)] = ec
		}
		if binary && (b.score != 0 && b.score != 1 || r.score != 0 && r.score != 1) {
			binary = false
		}
		switch {
		case b.score == 1 && r.score == 0:
			b01++
		case b.score == 0 && r.score == 1:
			c01++
		}
		for _, bn := range b.named {
			for _, rn := range r.named {
				if rn.name == bn.name {
					m := named[bn.name]
					if m == nil {
						m = &stats.Mean{}
						named[bn.name] = m
					}
					m.Add(rn.v - bn.v)
				}
			}
		}
		b.named, r.named = nil, nil // a changed case's line is read again for what it lists
		if d < 0 {
			worse.add(changedCase{ID: id, Base: b.score, New: r.score, Diff: d, baseAt: b, newAt: r})
		} else if d > 0 {
			better.add(changedCase{ID: id, Base: b.score, New: r.score, Diff: d, baseAt: b, newAt: r})
		}
		return nil
	}); err != nil {
		return nil, err
	}
	c.Paired = diff.N()
	for i := range base.entries {
		if e := &base.entries[i]; !e.seen {
			c.OnlyBase.add(base.id(e))
		}
	}
	c.OnlyBase.First, c.OnlyNew.First = append([]string{}, c.OnlyBase.First...), append([]string{}, c.OnlyNew.First...)
	smaller := min(c.Base.Results, c.New.Results)
	switch {
	case smaller == 0:
		return nil, fmt.Errorf("%s has no results to compare", emptySide(c))
	case c.Paired == 0:
		return nil, fmt.Errorf("BASE (%s) and NEW (%s) share no case id: they are results of different datasets", strings.Join(baseFiles, ", "), strings.Join(f.new, ", "))
	case 2*c.Paired < smaller && !f.allowPartial:
		return nil, fmt.Errorf("BASE (%s) and NEW (%s) share only %d of the %d case(s) of the smaller: they look like results of different datasets (--allow-partial compares the %d shared)",
			strings.Join(baseFiles, ", "), strings.Join(f.new, ", "), c.Paired, smaller, c.Paired)
	}
	c.Base.Mean, c.New.Mean = baseMean.Mean(), newMean.Mean()
	c.Diff = diffOf(diff)
	if lo, hi := diff.Interval(0.95); !math.IsNaN(lo) {
		c.Worse95, c.Better95 = hi < 0, lo > 0
	}
	if binary {
		c.McNemar = &mcnemarJSON{Worse: b01, Better: c01, P: stats.McNemar(b01, c01)}
	}
	for i, m := range named {
		c.Named[names.list[i]] = diffOf(*m)
	}
	c.Worse, c.Better = worse.sorted(), better.sorted()
	if err := readFeedbacks(baseFiles, f.new, c.Worse, c.Better); err != nil {
		return nil, err
	}
	return c, nil
}

func emptySide(c *comparison) string {
	if c.Base.Results == 0 {
		return "BASE (" + strings.Join(c.Base.Files, ", ") + ")"
	}
	return "NEW (" + strings.Join(c.New.Files, ", ") + ")"
}

func diffOf(m stats.Mean) diffJSON {
	lo, hi := m.Interval(0.95)
	return diffJSON{N: m.N(), Mean: m.Mean(), SE: m.SE(), Low: lo, High: hi}
}

// idsJSON.add counts an id, keeping the first few.
func (l *idsJSON) add(id string) {
	l.Count++
	if len(l.First) < summaryIDs*2 {
		l.First = append(l.First, id)
	}
}

// lineAt is a line of a file, for messages.
type lineAt struct {
	path string
	n    int
}

func (l lineAt) String() string { return fmt.Sprintf("%s:%d", l.path, l.n) }

// namesSeen numbers the named scores met: a line names them as the line
// before did, nearly always, so each name is matched against the last
// line's at its place before the map is asked.
type namesSeen struct {
	index map[string]int32
	list  []string
	last  [][]byte // the last line's names, as it wrote them
}

func (n *namesSeen) of(raw []byte, at int) int32 {
	if at < len(n.last) && string(n.last[at]) == string(raw) {
		return n.index[n.decoded(raw)]
	}
	name := n.decoded(raw)
	i, ok := n.index[name]
	if !ok {
		if n.index == nil {
			n.index = map[string]int32{}
		}
		i = int32(len(n.list))
		n.index[name] = i
		n.list = append(n.list, name)
	}
	for len(n.last) <= at {
		n.last = append(n.last, nil)
	}
	n.last[at] = append(n.last[at][:0], raw...)
	return i
}

// decoded is a name as a JSON string's text, decoded.
func (n *namesSeen) decoded(raw []byte) string {
	if len(raw) >= 2 && raw[0] == '"' && !slices.Contains(raw, '\\') {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	json.Unmarshal(raw, &s)
	return s
}

// eachResult reads the results files, calling fn with each results line's
// fields, its named scores (numbered by names; the slice is reused) and
// where it is; a line that is not a result stops it with an error naming
// the file and line.
func eachResult(files []string, names *namesSeen, fn func(rf caseio.ResultFields, named []namedValue, file int, offset int64, at lineAt) error) error {
	var named []namedValue
	for fi, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, errors.Unwrap(err))
		}
		err = eachLine(f, func(line []byte, n int, offset int64) error {
			rf, quick := caseio.QuickResultFields(line)
			if !quick {
				var err error
				if rf, err = caseio.ParseResultFields(line); err != nil {
					return fmt.Errorf("%s:%d: not a results line (%v): %s", path, n, err, abbrevLine(line))
				}
			}
			named = named[:0]
			if rf.Scores != nil {
				at := 0
				add := func(raw []byte, v float64) {
					named = append(named, namedValue{names.of(raw, at), v})
					at++
				}
				if !caseio.EachQuickScore(rf.Scores, add) {
					named, at = named[:0], 0
					caseio.EachNamedScore(rf.Scores, func(name string, v float64) { add(caseio.AppendString(nil, name), v) })
				}
			}
			return fn(rf, named, fi, offset, lineAt{path, n})
		})
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// readSide reads one side's results files, calling fn with each result
// (cancelled ones aside: they are not results) and where it is.
func readSide(files []string, names *namesSeen, fn func(id string, r sideResult, where lineAt) error) error {
	return eachResult(files, names, func(rf caseio.ResultFields, named []namedValue, file int, offset int64, at lineAt) error {
		if rf.Kind == engine.KindCanceled {
			return nil
		}
		return fn(rf.ID, sideResult{score: rf.Score, kind: rf.Kind, file: file, offset: offset, named: named}, at)
	})
}

// eachLine calls fn with each line of r that is not blank, its number and
// where it starts.
func eachLine(r io.Reader, fn func(line []byte, n int, offset int64) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	var off int64
	var long []byte
	for n := 1; ; n++ {
		frag, err := br.ReadSlice('\n')
		line := frag
		if err == bufio.ErrBufferFull {
			long = append(long[:0], frag...)
			for err == bufio.ErrBufferFull {
				frag, err = br.ReadSlice('\n')
				long = append(long, frag...)
			}
			line = long
		}
		if err != nil && err != io.EOF {
			return err
		}
		at := off
		off += int64(len(line))
		if t := trimSpace(line); len(t) > 0 {
			if ferr := fn(t, n, at); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// abbrevLine is a line for a message: its first 80 bytes.
func abbrevLine(line []byte) string {
	if len(line) > 80 {
		return fmt.Sprintf("%q...", line[:80])
	}
	return fmt.Sprintf("%q", line)
}

// topChanges keeps the k largest changes of one direction: a min-heap
// on the size of the change, its top the least kept, which a larger one
// replaces; a change no larger costs one comparison.
type topChanges struct {
	k     int
	worse bool
	list  []changedCase // a heap: list[0] is the least kept
}

func newTopChanges(k int, worse bool) *topChanges { return &topChanges{k: k, worse: worse} }

// bigger orders changes by size, then by id (the smaller id first).
func (t *topChanges) bigger(a, b *changedCase) bool {
	if x, y := math.Abs(a.Diff), math.Abs(b.Diff); x != y {
		return x > y
	}
	return a.ID < b.ID
}

func (t *topChanges) add(c changedCase) {
	switch {
	case t.k <= 0:
		return
	case len(t.list) < t.k:
		t.list = append(t.list, c)
		for i := len(t.list) - 1; i > 0; { // up while bigger's least is below
			p := (i - 1) / 2
			if !t.bigger(&t.list[p], &t.list[i]) {
				break
			}
			t.list[p], t.list[i] = t.list[i], t.list[p]
			i = p
		}
		return
	case !t.bigger(&c, &t.list[0]):
		return
	}
	t.list[0] = c
	for i := 0; ; {
		least, a, b := i, 2*i+1, 2*i+2
		if a < len(t.list) && t.bigger(&t.list[least], &t.list[a]) {
			least = a
		}
		if b < len(t.list) && t.bigger(&t.list[least], &t.list[b]) {
			least = b
		}
		if least == i {
			return
		}
		t.list[i], t.list[least] = t.list[least], t.list[i]
		i = least
	}
}

// sorted is the changes kept, largest first.
func (t *topChanges) sorted() []changedCase {
	out := slices.Clone(t.list)
	sort.Slice(out, func(i, j int) bool { return t.bigger(&out[i], &out[j]) })
	if out == nil {
		out = []changedCase{}
	}
	return out
}

// readFeedbacks reads again the lines of the listed cases for their
// feedback and error.
func readFeedbacks(baseFiles, newFiles []string, lists ...[]changedCase) error {
	read := func(files []string, r sideResult) (feedback, kind string, err error) {
		f, err := os.Open(files[r.file])
		if err != nil {
			return "", "", err
		}
		defer f.Close()
		if _, err := f.Seek(r.offset, io.SeekStart); err != nil {
			return "", "", err
		}
		line, err := bufio.NewReaderSize(f, 1<<16).ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", "", err
		}
		res, err := caseio.ParseResult(trimSpace(line))
		if err != nil {
			return "", "", err
		}
		if res.Err != nil {
			kind = string(res.Err.Kind)
		}
		return res.Feedback, kind, nil
	}
	for _, list := range lists {
		for i := range list {
			c := &list[i]
			var err error
			if c.BaseFeedback, c.BaseError, err = read(baseFiles, c.baseAt); err != nil {
				return err
			}
			if c.NewFeedback, c.NewError, err = read(newFiles, c.newAt); err != nil {
				return err
			}
		}
	}
	return nil
}

// signed writes a difference with its sign.
func signed(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	s := summaryNumber(math.Abs(v))
	if v < 0 {
		return "-" + s
	}
	return "+" + s
}

func (c *comparison) print(w io.Writer) {
	fmt.Fprintf(w, "BASE %s: %d result(s); NEW %s: %d result(s); %d case(s) paired by id\n",
		strings.Join(c.Base.Files, ", "), c.Base.Results, strings.Join(c.New.Files, ", "), c.New.Results, c.Paired)
	if c.OnlyBase.Count > 0 || c.OnlyNew.Count > 0 {
		fmt.Fprintf(w, "only in BASE: %d%s; only in NEW: %d%s (not compared)\n", c.OnlyBase.Count, firstIDs(c.OnlyBase), c.OnlyNew.Count, firstIDs(c.OnlyNew))
	}
	d := c.Diff
	spread := "one case: no interval"
	if !math.IsNaN(d.Low) {
		spread = fmt.Sprintf("95%% interval %s to %s; standard error %s of the paired differences", signed(d.Low), signed(d.High), summaryNumber(d.SE))
	}
	fmt.Fprintf(w, "mean score: BASE %s, NEW %s; difference %s (%s)\n", summaryNumber(c.Base.Mean), summaryNumber(c.New.Mean), signed(d.Mean), spread)
	if m := c.McNemar; m != nil {
		fmt.Fprintf(w, "scores are 0 or 1: %d case(s) went 1 -> 0, %d went 0 -> 1; McNemar's exact p = %.4g\n", m.Worse, m.Better, m.P)
	}
	if len(c.Named) > 0 {
		names := make([]string, 0, len(c.Named))
		for k := range c.Named {
			names = append(names, k)
		}
		sort.Strings(names)
		parts := make([]string, 0, len(names))
		for _, k := range names[:min(len(names), summaryNames)] {
			nd := c.Named[k]
			iv := ""
			if !math.IsNaN(nd.Low) {
				iv = fmt.Sprintf(" [%s, %s]", signed(nd.Low), signed(nd.High))
			}
			parts = append(parts, fmt.Sprintf("%s %s%s (%d)", summaryName(k), signed(nd.Mean), iv, nd.N))
		}
		fmt.Fprintf(w, "named scores, NEW - BASE: %s\n", strings.Join(parts, ", "))
	}
	if len(c.Errors) > 0 {
		kinds := make([]string, 0, len(c.Errors))
		for k, e := range c.Errors {
			kinds = append(kinds, fmt.Sprintf("%s %d -> %d", k, e.Base, e.New))
		}
		slices.Sort(kinds)
		fmt.Fprintf(w, "errors, BASE -> NEW: %s\n", strings.Join(kinds, ", "))
	}
	switch {
	case c.Worse95:
		fmt.Fprintln(w, "verdict: NEW is worse, with 95% confidence (the interval lies below 0)")
	case c.Better95:
		fmt.Fprintln(w, "verdict: NEW is better, with 95% confidence (the interval lies above 0)")
	default:
		fmt.Fprintln(w, "verdict: no difference shown at 95% confidence (the interval holds 0)")
	}
	for _, l := range []struct {
		title string
		list  []changedCase
	}{{"got worse", c.Worse}, {"got better", c.Better}} {
		if len(l.list) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s (largest change first):\n", l.title)
		for _, cc := range l.list {
			fmt.Fprintf(w, "  %s: %s -> %s (%s)\n    BASE: %s\n    NEW:  %s\n", summaryName(cc.ID), summaryNumber(cc.Base), summaryNumber(cc.New), signed(cc.Diff),
				feedbackLine(cc.BaseFeedback, cc.BaseError), feedbackLine(cc.NewFeedback, cc.NewError))
		}
	}
}

func firstIDs(l idsJSON) string {
	if l.Count == 0 {
		return ""
	}
	ids := make([]string, len(l.First))
	for i, id := range l.First {
		ids[i] = summaryName(id)
	}
	more := ""
	if l.Count > len(l.First) {
		more = ", ..."
	}
	return " (" + strings.Join(ids, ", ") + more + ")"
}

// feedbackLine is a feedback on one line, cut short, with its error kind.
func feedbackLine(feedback, kind string) string {
	feedback = strings.Join(strings.Fields(feedback), " ")
	if r := []rune(feedback); len(r) > 160 {
		feedback = string(r[:160]) + "..."
	}
	if kind != "" {
		return fmt.Sprintf("[%s] %s", kind, feedback)
	}
	return feedback
}
