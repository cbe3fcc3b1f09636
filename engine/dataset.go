package engine

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
	// split's file in a directory. Empty: every row of a file.
	Split string
	// Sample picks that many rows at random (reproducibly from Seed),
	// keeping their order; Limit then keeps the first Limit. 0: all.
	Sample int
	Seed   uint64 // seeds Sample's choice: the same seed, the same rows
	Limit  int    // evaluate at most this many rows (0: all)
}

// row is one dataset row before it becomes a Case.
type row struct {
	where  string // file:line
	id     string
	fields []cpython.Member // column name and raw JSON value
	err    error
}

// Cases reads the dataset. A bad row (missing column, bad JSON, not an
// object) becomes a Case that yields an input error naming file and line;
// no row is dropped. An error is returned only when the dataset cannot be
// read at all.
func (d Dataset) Cases() ([]Case, error) {
	path, err := d.file()
	if err != nil {
		return nil, err
	}
	var rows []row
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		rows, err = readJSONL(path)
	case ".csv":
		rows, err = readCSV(path)
	default:
		return nil, fmt.Errorf("dataset %s: use a .jsonl or .csv file", path)
	}
	if err != nil {
		return nil, err
	}
	if d.Split != "" && !isDir(d.Path) {
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
	cases := make([]Case, len(rows))
	for i, r := range rows {
		cases[i] = d.toCase(r)
	}
	return cases, nil
}

func (d Dataset) file() (string, error) {
	if !isDir(d.Path) {
		if _, err := os.Stat(d.Path); err != nil {
			return "", fmt.Errorf("dataset: %w", err)
		}
		return d.Path, nil
	}
	if d.Split == "" {
		return "", fmt.Errorf("dataset %s is a directory of splits: choose one (--split train|val|test)", d.Path)
	}
	for _, ext := range []string{".jsonl", ".ndjson", ".csv"} {
		p := filepath.Join(d.Path, d.Split+ext)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("dataset %s: no file for split %q (%s.jsonl or %s.csv)", d.Path, d.Split, d.Split, d.Split)
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

func (d Dataset) toCase(r row) Case {
	id := r.id
	if r.err != nil {
		return InvalidCase(id, fmt.Errorf("%s: %v", r.where, r.err))
	}
	bad := func(format string, args ...any) Case {
		return InvalidCase(id, fmt.Errorf("%s: "+format, append([]any{r.where}, args...)...))
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
	c := Case{ID: id, Input: input}
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
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			if err == io.EOF {
				return rows, nil
			}
			return nil, fmt.Errorf("dataset %s: %w", path, err)
		}
		line = bytes.TrimSpace(line)
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
	cr := csv.NewReader(f)
	cr.FieldsPerRecord = -1 // a short row is that row's error, not the file's
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("dataset %s: reading the header row: %w", path, err)
	}
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
			r.err = fmt.Errorf("%d fields, the header has %d", len(rec), len(header))
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
