package caseio

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/skynetml/skynet/cpython"
	"github.com/skynetml/skynet/engine"
	"github.com/skynetml/skynet/internal/suggest"
)

// Dataset names the cases a program is evaluated on (SPEC §4): JSONL or
// CSV rows whose input columns make the case's input and whose output
// columns make its expected dict.
type Dataset struct {
	// Path is a .jsonl or .csv file, or a directory holding one file per
	// split (train.jsonl, val.csv, ...).
	Path string
	// Inputs are the input columns; empty: every column that is not an
	// output, "id" or "split".
	Inputs []string
	// Outputs are the output columns; empty: expected is None.
	Outputs []string
	// Split keeps one split: rows whose "split" column equals it, or the
	// split's file in a directory. Empty: every row of a file. It is
	// case-sensitive.
	Split string
	// Sample picks that many rows at random (reproducibly from Seed),
	// keeping their order; Limit then keeps the first Limit. 0: all.
	Sample int
	Seed   uint64 // seeds Sample's choice: the same seed, the same rows
	Limit  int    // evaluate at most this many rows (0: all)
}

// row is one dataset row before it becomes an engine.Case.
type row struct {
	where  string // file:line
	id     string
	fields []cpython.Member // column name and raw JSON value
	err    error
}

// Cases reads the dataset. A bad row (missing column, bad JSON, not an
// object) becomes an engine.Case that yields an input error naming file and line;
// no row is dropped. An error is returned when the dataset cannot be read
// at all, holds no rows, names in Inputs or Outputs a column no row has (a
// *ColumnError), or Split selects none (a *SplitError). A UTF-8
// byte order mark at the start of a file is skipped; CRLF reads as LF.
func (d Dataset) Cases() ([]engine.Case, error) {
	path, rows, err := d.rows()
	if err != nil {
		return nil, err
	}
	if err := d.columnsExist(path, rows); err != nil {
		return nil, err
	}
	if d.Split != "" && !isDir(d.Path) {
		if err := d.splitExists(path, rows); err != nil {
			return nil, err
		}
		rows = slices.DeleteFunc(rows, func(r row) bool {
			v, ok := field(r, "split")
			return r.err == nil && (!ok || jsonString(v) != d.Split)
		})
	}
	if d.Sample > 0 && d.Sample < len(rows) {
		rng := rand.New(rand.NewPCG(d.Seed, d.Seed^0x9e3779b97f4a7c15))
		keep := rng.Perm(len(rows))[:d.Sample]
		slices.Sort(keep)
		picked := make([]row, len(keep))
		for i, k := range keep {
			picked[i] = rows[k]
		}
		rows = picked
	}
	if d.Limit > 0 && d.Limit < len(rows) {
		rows = rows[:d.Limit]
	}
	cases := make([]engine.Case, len(rows))
	for i, r := range rows {
		cases[i] = d.toCase(r)
	}
	return cases, nil
}

// Splits names the dataset's splits: a directory's split files, or the
// values of a file's "split" column in order of appearance (none when it
// has no such column). Split, Inputs, Outputs, Sample and Limit play no part.
func (d Dataset) Splits() ([]string, error) {
	if isDir(d.Path) {
		return splitFiles(d.Path), nil
	}
	_, rows, err := d.rows()
	if err != nil {
		return nil, err
	}
	var splits []string
	for _, r := range rows {
		if v, ok := field(r, "split"); ok && r.err == nil && !slices.Contains(splits, jsonString(v)) {
			splits = append(splits, jsonString(v))
		}
	}
	return splits, nil
}

// rows reads the file of the dataset (of the split, for a directory).
func (d Dataset) rows() (path string, rows []row, err error) {
	if path, err = d.file(); err != nil {
		return "", nil, err
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		rows, err = readJSONL(path)
	case ".csv":
		rows, err = readCSV(path)
	default:
		return "", nil, fmt.Errorf("dataset %s: use a .jsonl or .csv file", path)
	}
	if err != nil {
		return "", nil, err
	}
	if len(rows) == 0 {
		return "", nil, fmt.Errorf("dataset %s has no cases: it holds no rows", path)
	}
	return path, rows, nil
}

func (d Dataset) file() (string, error) {
	if !isDir(d.Path) {
		if _, err := os.Stat(d.Path); err != nil {
			return "", fmt.Errorf("dataset: %w", err)
		}
		return d.Path, nil
	}
	splits := splitFiles(d.Path)
	if len(splits) == 0 {
		return "", fmt.Errorf("dataset %s is a directory with no split file in it (train.jsonl, val.csv, ...)", d.Path)
	}
	if d.Split == "" {
		return "", fmt.Errorf("dataset %s is a directory of splits: choose one (--split %s)", d.Path, strings.Join(splits, "|"))
	}
	for _, ext := range datasetExts {
		p := filepath.Join(d.Path, d.Split+ext)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", &SplitError{Path: d.Path, Split: d.Split, Splits: splits, Dir: true}
}

// datasetExts are the endings of the files a dataset is read from, in the
// order a split directory's files are looked for.
var datasetExts = []string{".jsonl", ".ndjson", ".csv"}

// splitFiles names the splits a directory holds a file for, the usual ones
// first (train, val, test), then the others in alphabetical order.
func splitFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var splits []string
	for _, e := range entries {
		for _, ext := range datasetExts {
			if name, ok := strings.CutSuffix(e.Name(), ext); ok && name != "" && !e.IsDir() && !slices.Contains(splits, name) {
				splits = append(splits, name)
			}
		}
	}
	rank := func(s string) int {
		switch s {
		case "train":
			return 0
		case "val", "validation", "dev":
			return 1
		case "test":
			return 2
		}
		return 3
	}
	slices.SortFunc(splits, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	return splits
}

// SplitError is a Dataset whose Split selects nothing: no row of the file
// has that value in its "split" column (or the file has no such column),
// or a directory of splits has no file for it.
type SplitError struct {
	Path     string   // the dataset file or directory
	Split    string   // the split asked for
	Splits   []string // the splits there are: the column's values in order of appearance, or the directory's files
	NoColumn bool     // the file has no "split" column
	Dir      bool     // Path is a directory of split files
}

// Error names the file and the splits it has, and the one meant when only
// letter case differs (splits are case-sensitive).
func (e *SplitError) Error() string {
	var msg string
	switch {
	case e.Dir:
		msg = fmt.Sprintf("dataset %s has no file for split %q (its splits: %s)", e.Path, e.Split, strings.Join(e.Splits, ", "))
	case e.NoColumn:
		return fmt.Sprintf("%s has no \"split\" column", e.Path)
	default:
		msg = fmt.Sprintf("no row of %s has split %q (its splits: %s)", e.Path, e.Split, strings.Join(e.Splits, ", "))
	}
	for _, s := range e.Splits {
		if strings.EqualFold(s, e.Split) {
			msg += fmt.Sprintf("; splits are case-sensitive: did you mean %q?", s)
			break
		}
	}
	return msg
}

// splitExists says, as a *SplitError, when no readable row of the file is
// in d.Split.
func (d Dataset) splitExists(path string, rows []row) error {
	var splits []string
	for _, r := range rows {
		v, ok := field(r, "split")
		if r.err != nil || !ok {
			continue
		}
		s := jsonString(v)
		if s == d.Split {
			return nil
		}
		if !slices.Contains(splits, s) {
			splits = append(splits, s)
		}
	}
	return &SplitError{Path: path, Split: d.Split, Splits: splits, NoColumn: len(splits) == 0}
}

// ColumnError is a Dataset whose Inputs or Outputs name a column that no
// row of the file has (a typo, most likely). A column that only some rows
// lack is those rows' input error instead.
type ColumnError struct {
	Path    string   // the dataset file
	Column  string   // the column named
	Output  bool     // it is one of Outputs (else of Inputs)
	Columns []string // the columns the file's rows have, in order of first appearance
}

// Error names the file, its columns and the one meant, when one is close.
func (e *ColumnError) Error() string {
	msg := fmt.Sprintf("no row of %s has a column %q (its columns: %s)", e.Path, e.Column, strings.Join(e.Columns, ", "))
	if near := closestColumn(e.Column, e.Columns); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	return msg
}

// columnsExist says, as a *ColumnError, when a named column is in no
// readable row; with no readable row, the rows' own errors tell.
func (d Dataset) columnsExist(path string, rows []row) error {
	var cols []string
	for _, r := range rows {
		if r.err != nil {
			continue
		}
		for _, f := range r.fields {
			if !slices.Contains(cols, f.Key) {
				cols = append(cols, f.Key)
			}
		}
	}
	if len(cols) == 0 {
		return nil
	}
	for _, named := range []struct {
		cols   []string
		output bool
	}{{d.Inputs, false}, {d.Outputs, true}} {
		for _, c := range named.cols {
			if !slices.Contains(cols, c) {
				return &ColumnError{Path: path, Column: c, Output: named.output, Columns: cols}
			}
		}
	}
	return nil
}

// closestColumn is the column of cols that name is a typo of: the same
// but for letter case, else within an edit distance of 2 (and shorter than
// name, so that "x" is not taken for "id"); "" when none is.
func closestColumn(name string, cols []string) string {
	for _, c := range cols {
		if strings.EqualFold(c, name) {
			return c
		}
	}
	best, bestD := "", 3
	for _, c := range cols {
		if d := suggest.Distance(name, c); d < bestD && d < len(name) {
			best, bestD = c, d
		}
	}
	return best
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func field(r row, name string) ([]byte, bool) {
	for _, f := range r.fields {
		if f.Key == name {
			return f.Value, true
		}
	}
	return nil, false
}

func jsonString(raw []byte) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func (d Dataset) toCase(r row) engine.Case {
	id := r.id
	if r.err != nil {
		return engine.InvalidCase(id, fmt.Errorf("%s: %v", r.where, r.err))
	}
	bad := func(format string, args ...any) engine.Case {
		return engine.InvalidCase(id, fmt.Errorf("%s: "+format, append([]any{r.where}, args...)...))
	}
	inputs := d.Inputs
	if len(inputs) == 0 {
		for _, f := range r.fields {
			if f.Key != "id" && f.Key != "split" && !slices.Contains(d.Outputs, f.Key) {
				inputs = append(inputs, f.Key)
			}
		}
	}
	object := func(cols []string) (json.RawMessage, string) {
		var b bytes.Buffer
		b.WriteByte('{')
		for i, col := range cols {
			v, ok := field(r, col)
			if !ok {
				return nil, col
			}
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(col)
			b.Write(k)
			b.WriteByte(':')
			b.Write(v)
		}
		b.WriteByte('}')
		return b.Bytes(), ""
	}
	input, missing := object(inputs)
	if missing != "" {
		return bad("missing input column %q", missing)
	}
	c := engine.Case{ID: id, Input: input}
	if len(d.Outputs) > 0 {
		expected, missing := object(d.Outputs)
		if missing != "" {
			return bad("missing output column %q", missing)
		}
		c.Expected = expected
	}
	return c
}

func readJSONL(path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	var rows []row
	br := bufio.NewReaderSize(f, 1<<16)
	skipBOM(br)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			if err == io.EOF {
				return rows, nil
			}
			return nil, fmt.Errorf("dataset %s: %w", path, err)
		}
		line = trimJSONSpace(line) // CR of a CRLF too; a U+00A0 line is a bad row, not blank
		if len(line) == 0 {
			continue
		}
		r := row{where: fmt.Sprintf("%s:%d", path, n), id: strconv.Itoa(n)}
		if kind := jsonKind(line); kind != "an object" {
			r.err = fmt.Errorf("a row must be a JSON object, got %s", kind)
			if _, jerr := cpython.AppendJSON(nil, line); jerr != nil {
				r.err = jerr
			}
		} else if r.fields, err = cpython.SplitObject(line, nil); err != nil {
			r.err = err
		}
		if v, ok := field(r, "id"); ok && r.err == nil {
			r.id = jsonString(v)
		}
		rows = append(rows, r)
	}
}

func readCSV(path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	skipBOM(br)
	cr := csv.NewReader(br) // CRLF line endings are read as LF
	cr.FieldsPerRecord = -1 // a short row is that row's error, not the file's
	header, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("dataset %s has no cases: it is empty (a CSV dataset starts with a header row)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset %s: reading the header row: %w", path, err)
	}
	idCol := slices.Index(header, "id")
	var rows []row
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		line, _ := cr.FieldPos(0)
		r := row{where: fmt.Sprintf("%s:%d", path, line), id: strconv.Itoa(line)}
		var pe *csv.ParseError
		switch {
		case errors.As(err, &pe):
			r.where, r.err = fmt.Sprintf("%s:%d", path, pe.Line), pe.Err
		case err != nil:
			return nil, fmt.Errorf("dataset %s: %w", path, err)
		case len(rec) != len(header):
			if idCol >= 0 && idCol < len(rec) {
				r.id = rec[idCol] // the row's own id, though the row is bad
			}
			fields := fmt.Sprintf("%d fields", len(rec))
			if len(rec) == 1 {
				fields = "1 field"
			}
			r.err = fmt.Errorf("%s, the header has %d", fields, len(header))
			if len(rec) < len(header) {
				missing := make([]string, 0, len(header)-len(rec))
				for _, col := range header[len(rec):] {
					missing = append(missing, strconv.Quote(col))
				}
				r.err = fmt.Errorf("%s, the header has %d: no value for %s", fields, len(header), strings.Join(missing, ", "))
			}
		default:
			for i, v := range rec {
				raw, _ := json.Marshal(v) // CSV values are strings, as Python's csv module reads them
				r.fields = append(r.fields, cpython.Member{Key: header[i], Value: raw})
				if header[i] == "id" {
					r.id = v
				}
			}
		}
		rows = append(rows, r)
	}
}

// skipBOM passes over a UTF-8 byte order mark at the start of br, as the
// case-file reader does.
func skipBOM(br *bufio.Reader) {
	if b, err := br.Peek(len(utf8BOM)); err == nil && bytes.Equal(b, utf8BOM) {
		br.Discard(len(utf8BOM))
	}
}
