package engine

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ids(cases []Case) []string {
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
	e := open(t, Options{Metric: "../testdata/exact_match/metric.py"})
	var got []string
	for _, c := range cases {
		r := e.Score(ctx, Case{ID: c.ID, Input: c.Input, Expected: c.Expected, Output: "billing", invalid: c.invalid})
		if r.Err != nil {
			got = append(got, string(r.Err.Kind)+": "+r.Err.Message)
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
