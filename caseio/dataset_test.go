package caseio

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skynetml/skynet/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ids(cases []engine.Case) []string {
	var out []string
	for _, c := range cases {
		out = append(out, c.ID)
	}
	return out
}

func TestDatasetSplitsAndColumns(t *testing.T) {
	for _, tc := range []struct {
		d    Dataset
		want []string
	}{
		{Dataset{Path: "../testdata/dataset/tickets.jsonl", Outputs: []string{"label"}}, []string{"d1", "d2", "d3", "d4", "d5", "d6"}},
		{Dataset{Path: "../testdata/dataset/tickets.jsonl", Outputs: []string{"label"}, Split: "val"}, []string{"d3", "d4"}},
		{Dataset{Path: "../testdata/dataset/tickets.csv", Outputs: []string{"label"}, Split: "train"}, []string{"c1", "c2"}},
		{Dataset{Path: "../testdata/dataset/splits", Outputs: []string{"label"}, Split: "test"}, []string{"d5", "d6"}},
		{Dataset{Path: "../testdata/dataset/tickets.jsonl", Outputs: []string{"label"}, Limit: 2}, []string{"d1", "d2"}},
		{Dataset{Path: "../testdata/dataset/tickets.jsonl", Outputs: []string{"label"}, Sample: 3, Seed: 7}, nil},
	} {
		cases, err := tc.d.Cases()
		require.NoError(t, err)
		if tc.want != nil {
			assert.Equal(t, tc.want, ids(cases), "%+v", tc.d)
		} else {
			again, _ := tc.d.Cases()
			assert.Len(t, cases, 3)
			assert.Equal(t, ids(cases), ids(again), "a seeded sample is reproducible")
		}
	}
	cases, err := Dataset{Path: "../testdata/dataset/tickets.csv", Inputs: []string{"message"}, Outputs: []string{"label"}}.Cases()
	require.NoError(t, err)
	assert.Equal(t, `{"message":"Refund my last invoice, please."}`, string(cases[3].Input.(json.RawMessage)))
	assert.Equal(t, `{"label":"billing"}`, string(cases[3].Expected.(json.RawMessage)))
	_, err = Dataset{Path: "../testdata/dataset/splits"}.Cases()
	assert.ErrorContains(t, err, "choose one (--split train|val|test)")
	_, err = Dataset{Path: "../testdata/dataset/splits", Split: "dev"}.Cases()
	assert.ErrorContains(t, err, `no file for split "dev"`)
}

func TestDatasetBadRowsAreKept(t *testing.T) {
	cases, err := Dataset{Path: "../testdata/dataset/bad_rows.jsonl", Outputs: []string{"label"}}.Cases()
	require.NoError(t, err)
	require.Len(t, cases, 5, "no row is dropped")
	// Scoring an invalid case gives a KindInput result with this message.
	var got []string
	for _, c := range cases {
		if err := c.Invalid(); err != nil {
			got = append(got, "input: "+err.Error())
		} else {
			got = append(got, "ok")
		}
	}
	assert.Equal(t, []string{
		"ok",
		`input: ../testdata/dataset/bad_rows.jsonl:2: missing output column "label"`,
		"input: ../testdata/dataset/bad_rows.jsonl:3: a row must be a JSON object, got an array",
		"input: ../testdata/dataset/bad_rows.jsonl:4: invalid JSON at byte 31: unterminated string",
		"ok",
	}, got)
}

func writeDataset(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

// A UTF-8 byte order mark at the start of a dataset is skipped, as in a
// case file, and CRLF line endings read as LF: CSV and JSONL, single files
// and a split directory's. Without it the first CSV column was "\ufeffid"
// (every id lost, a "\ufeffid" input column) and JSONL's first row bad JSON.
func TestDatasetBOMAndCRLF(t *testing.T) {
	dir := t.TempDir()
	const bom = "\ufeff"
	csvText := "id,message,label,split\r\na1,hello,x,val\r\na2,\"two\r\nlines\",y,val\r\n"
	jsonlText := `{"id": "a1", "message": "hello", "label": "x", "split": "val"}` + "\r\n" + `{"id": "a2", "message": "two", "label": "y", "split": "val"}` + "\r\n"
	require.NoError(t, os.Mkdir(filepath.Join(dir, "splits"), 0o755))
	for _, path := range []string{
		writeDataset(t, dir, "bom.csv", bom+csvText),
		writeDataset(t, dir, "bom.jsonl", bom+jsonlText),
		writeDataset(t, dir, "splits/val.csv", bom+csvText),
		writeDataset(t, dir, "splits/test.jsonl", bom+jsonlText),
	} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			d := Dataset{Path: path, Outputs: []string{"label"}}
			if filepath.Base(filepath.Dir(path)) == "splits" {
				d.Path, d.Split = filepath.Dir(path), strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
			} else {
				d.Split = "val"
			}
			cases, err := d.Cases()
			require.NoError(t, err)
			require.Equal(t, []string{"a1", "a2"}, ids(cases))
			for _, c := range cases {
				require.Nil(t, c.Invalid(), "%s: %v", c.ID, c.Invalid())
			}
			assert.Equal(t, `{"message":"hello"}`, string(cases[0].Input.(json.RawMessage)), "no \\ufeffid column, no \\r in a value")
			assert.Equal(t, `{"label":"x"}`, string(cases[0].Expected.(json.RawMessage)))
		})
	}
}

// A split that selects nothing is an error naming the file and the splits
// it has (and the one meant when only case differs), not zero cases.
func TestDatasetSplitSelectsNothing(t *testing.T) {
	dir := t.TempDir()
	data := writeDataset(t, dir, "data.csv", "id,message,split\n1,a,train\n2,b,val\n3,c,train\n")
	nosplit := writeDataset(t, dir, "nosplit.jsonl", `{"id": "1", "message": "a"}`+"\n")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "splits"), 0o755))
	writeDataset(t, dir, "splits/val.jsonl", `{"id": "1", "message": "a"}`+"\n")
	writeDataset(t, dir, "splits/train.csv", "id,message\n1,a\n")
	writeDataset(t, dir, "splits/notes.txt", "not a split")
	splits := filepath.Join(dir, "splits")
	for _, tc := range []struct {
		d    Dataset
		want string
	}{
		{Dataset{Path: data, Split: "test"}, `no row of ` + data + ` has split "test" (its splits: train, val)`},
		{Dataset{Path: data, Split: "Val"}, `no row of ` + data + ` has split "Val" (its splits: train, val); splits are case-sensitive: did you mean "val"?`},
		{Dataset{Path: nosplit, Split: "val"}, nosplit + ` has no "split" column`},
		{Dataset{Path: splits, Split: "nope"}, `dataset ` + splits + ` has no file for split "nope" (its splits: train, val)`},
		{Dataset{Path: splits, Split: "VAL"}, `(its splits: train, val); splits are case-sensitive: did you mean "val"?`},
		{Dataset{Path: splits}, "choose one (--split train|val)"},
	} {
		_, err := tc.d.Cases()
		require.Error(t, err, "%+v", tc.d)
		assert.Contains(t, err.Error(), tc.want)
		var se *SplitError
		if tc.d.Split != "" {
			assert.ErrorAs(t, err, &se)
		}
	}
	cases, err := Dataset{Path: data, Split: "val"}.Cases()
	require.NoError(t, err)
	assert.Equal(t, []string{"2"}, ids(cases))
}

// A dataset without rows is an error naming it: there is nothing to evaluate.
func TestDatasetWithoutRows(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"empty.csv": "", "header.csv": "id,message\r\n", "empty.jsonl": "", "blank.jsonl": "\n \r\n\t\n", "bom.jsonl": "\ufeff\n"} {
		path := writeDataset(t, dir, name, text)
		_, err := Dataset{Path: path}.Cases()
		assert.ErrorContains(t, err, "dataset "+path+" has no cases", name)
		_, err = Dataset{Path: path, Split: "val"}.Cases()
		assert.ErrorContains(t, err, "has no cases", "%s: no rows at all, not a split missing", name)
	}
}

// A CSV row with fewer cells than the header keeps its id when its id cell
// is there, and its error names the columns without a value.
func TestDatasetShortCSVRowKeepsID(t *testing.T) {
	dir := t.TempDir()
	path := writeDataset(t, dir, "short.csv", "id,message,label\nz1,hi,x\nz2,short\nz3\nz4,a,b,extra\n")
	cases, err := Dataset{Path: path, Outputs: []string{"label"}}.Cases()
	require.NoError(t, err)
	require.Equal(t, []string{"z1", "z2", "z3", "z4"}, ids(cases))
	assert.Nil(t, cases[0].Invalid())
	require.NotNil(t, cases[1].Invalid())
	assert.Equal(t, path+`:3: 2 fields, the header has 3: no value for "label"`, cases[1].Invalid().Error())
	assert.Equal(t, path+`:4: 1 field, the header has 3: no value for "message", "label"`, cases[2].Invalid().Error())
	assert.Equal(t, path+`:5: 4 fields, the header has 3`, cases[3].Invalid().Error())
}

// An input or output column that no row has (a typo) is the Dataset's
// error, naming the file's columns and the one meant, not the same input
// error on every row and then a run that never called the metric. A column
// only some rows lack stays those rows' input error.
func TestDatasetColumnNoRowHas(t *testing.T) {
	dir := t.TempDir()
	data := writeDataset(t, dir, "data.csv", "id,question,answer,split\na1,q1,x,train\na2,q2,y,val\n")
	jsonl := writeDataset(t, dir, "data.jsonl", `{"id": "a1", "question": "q1", "answer": "x"}`+"\n"+`{"id": "a2", "Question": "q2", "answer": "y"}`+"\n")
	for _, tc := range []struct {
		d      Dataset
		column string
		output bool
		says   string
	}{
		{Dataset{Path: data, Outputs: []string{"answr"}}, "answr", true,
			`no row of ` + data + ` has a column "answr" (its columns: id, question, answer, split); did you mean "answer"?`},
		{Dataset{Path: data, Inputs: []string{"question", "nosuch"}, Outputs: []string{"answer"}}, "nosuch", false,
			`no row of ` + data + ` has a column "nosuch" (its columns: id, question, answer, split)`},
		{Dataset{Path: data, Outputs: []string{"ANSWER"}}, "ANSWER", true, `did you mean "answer"?`},
		{Dataset{Path: data, Inputs: []string{"x"}}, "x", false, `(its columns: id, question, answer, split)`},
		{Dataset{Path: jsonl, Outputs: []string{"label"}}, "label", true, `(its columns: id, question, answer, Question)`},
	} {
		_, err := tc.d.Cases()
		var ce *ColumnError
		require.True(t, errors.As(err, &ce), "%+v: %v", tc.d, err)
		assert.Equal(t, tc.column, ce.Column)
		assert.Equal(t, tc.output, ce.Output)
		assert.Contains(t, err.Error(), tc.says)
		if tc.column == "x" {
			assert.NotContains(t, err.Error(), "did you mean", `"x" is no typo of "id"`)
		}
	}
	// "question" is in one row of data.jsonl: the other row's input error.
	cases, err := Dataset{Path: jsonl, Inputs: []string{"question"}, Outputs: []string{"answer"}}.Cases()
	require.NoError(t, err)
	require.Len(t, cases, 2)
	assert.NoError(t, cases[0].Invalid())
	assert.ErrorContains(t, cases[1].Invalid(), jsonl+`:2: missing input column "question"`)
}

// Splits names a dataset's splits (skynet merge uses it to tell parts run
// with --split from a merge without it).
func TestDatasetSplits(t *testing.T) {
	for path, want := range map[string][]string{
		"../testdata/dataset/tickets.csv":    {"train", "val", "test"},
		"../testdata/dataset/tickets.jsonl":  {"train", "val", "test"},
		"../testdata/dataset/splits":         {"train", "val", "test"},
		"../testdata/dataset/bad_rows.jsonl": nil,
	} {
		got, err := Dataset{Path: path, Split: "ignored", Outputs: []string{"nosuch"}}.Splits()
		require.NoError(t, err, path)
		assert.Equal(t, want, got, path)
	}
	_, err := Dataset{Path: "../testdata/dataset/none.csv"}.Splits()
	assert.Error(t, err)
}
