package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseShard(t *testing.T) {
	s, err := parseShard("2/4")
	require.NoError(t, err)
	assert.Equal(t, 2, s.Index)
	assert.Equal(t, 4, s.Count)
	for _, bad := range []string{"4/4", "-1/4", "1/0", "a/4", "1", "1/2/3", ""} {
		_, err := parseShard(bad)
		assert.Error(t, err, bad)
	}
	_, err = parseShard("4/4")
	assert.ErrorContains(t, err, "the index must be from 0 to 3, got 4")
}

// Every id is in exactly one shard of N, and the shards are about even.
func TestShardsPartitionTheCases(t *testing.T) {
	const n, cases = 4, 20000
	count := make([]int, n)
	for i := 0; i < cases; i++ {
		id := fmt.Sprintf("case-%d", i)
		in := 0
		for k := 0; k < n; k++ {
			if (shardSpec{Index: k, Count: n}).takes(id) {
				in++
				count[k]++
			}
		}
		require.Equal(t, 1, in, id)
	}
	for k, c := range count {
		assert.InDelta(t, cases/n, c, cases/n*0.05, "shard %d", k)
	}
	assert.True(t, whole.takes("anything"))
}

func TestShardFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		env        func(string) string
		shards     int
		index, cnt int
		ok         bool
		err        string
	}{
		{env(), 0, 0, 0, false, ""},
		{env("SLURM_ARRAY_TASK_ID", "3", "SLURM_ARRAY_TASK_COUNT", "4"), 0, 3, 4, true, ""},
		{env("SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "1"), 0, 3, 4, true, ""},
		{env("SLURM_ARRAY_TASK_ID", "12", "SLURM_ARRAY_TASK_MIN", "10", "SLURM_ARRAY_TASK_MAX", "13"), 0, 2, 4, true, ""},
		{env("SLURM_ARRAY_TASK_ID", "2"), 0, 0, 0, false, "neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MIN/MAX are): pass --shards N or set SKYNET_SHARDS"},
		{env("SLURM_ARRAY_TASK_ID", "2"), 4, 2, 4, true, ""},
		{env("SLURM_ARRAY_TASK_ID", "2", "SKYNET_SHARDS", "3"), 0, 2, 3, true, ""},
		{env("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_COUNT", "4"), 0, 0, 0, false, "the index must be from 0 to 3"},
		{env("JOB_COMPLETION_INDEX", "1", "SKYNET_SHARDS", "3"), 0, 1, 3, true, ""},
		{env("JOB_COMPLETION_INDEX", "1", "SKYNET_SHARDS", "3"), 2, 1, 2, true, ""},
		{env("JOB_COMPLETION_INDEX", "1"), 0, 0, 0, false, "pass --shards N or set SKYNET_SHARDS"},
	} {
		s, ok, err := shardFromEnv(tc.env, tc.shards)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.ok, ok)
		if ok {
			assert.Equal(t, tc.index, s.Index)
			assert.Equal(t, tc.cnt, s.Count)
		}
	}
}

// --shard's count and --shards must agree: a task told two counts is refused.
func TestShardCountsDisagree(t *testing.T) {
	code, out, errOut := skynet("score", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--shard", "1/3", "--shards", "4")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "skynet score: --shard 1/3 is shard 1 of 3, but --shards says 4: give the count once")
	code, _, errOut = skynet("score", "--metric", example+"metric.py", "--data", example+"cases.jsonl", "--shard", "1/3", "--shards", "3")
	assert.Equal(t, exitOK, code, errOut)
}

// Four shards of a run, merged, are the single run id for id; a bad shard
// spec is a usage error; {shard} in --out names each part.
func TestShardAndMerge(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&b, `{"id": "c%d", "input": {"message": "m%d"}, "output": "billing", "expected": {"label": %q}}`+"\n", i, i, []string{"billing", "bug"}[i%2])
	}
	b.WriteString("not json\n") // a bad line is a case too: its id is its line number
	data := writeFile(t, dir, "cases.jsonl", b.String())
	code, single, errOut := skynet("score", "--metric", example+"metric.py", "--data", data)
	require.Equal(t, exitOK, code, errOut)

	out := filepath.Join(dir, "results-{shard}.jsonl")
	var parts []string
	total := 0
	for k := 0; k < 4; k++ {
		code, stdout, errOut := skynet("score", "--metric", example+"metric.py", "--data", data, "--out", out, "--shard", fmt.Sprintf("%d/4", k))
		require.Equal(t, exitOK, code, errOut)
		assert.Contains(t, stdout, fmt.Sprintf("shard %d of 4 (--shard %d/4)", k, k))
		part := filepath.Join(dir, fmt.Sprintf("results-%d.jsonl", k))
		total += linesIn(t, part)
		parts = append(parts, part)
	}
	assert.Equal(t, 41, total, "the shards hold every case once")

	merged := filepath.Join(dir, "merged.jsonl")
	code, stdout, errOut := skynet(append([]string{"merge", "--data", data, "--out", merged}, parts...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, stdout, "merged 41 result(s) from 4 part(s)\n")
	assert.NotContains(t, stdout, "scored", "merge scored nothing")
	want, have := resultLines(t, single), resultFile(t, merged)
	require.Len(t, have, len(want))
	for i := range want {
		assert.Equal(t, want[i].ID, have[i].ID)
		assert.Equal(t, want[i].Score, have[i].Score, want[i].ID)
		assert.Equal(t, want[i].Feedback, have[i].Feedback, want[i].ID)
		assert.Equal(t, want[i].Error == nil, have[i].Error == nil, want[i].ID)
	}

	// A part left out, and a part's copy given beside it (the same file
	// twice is refused up front: TestMergePartNamedTwice).
	again := filepath.Join(dir, "again.jsonl")
	b2, err := os.ReadFile(parts[2])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(again, b2, 0o644))
	code, _, errOut = skynet(append([]string{"merge", "--data", data, "--out", merged}, parts[0], parts[1], parts[2], again)...)
	assert.Equal(t, exitCheck, code)
	assert.Regexp(t, `case\(s\) with two results: "c\d+" in .*results-2.jsonl:1 and .*again.jsonl:1`, errOut)
	assert.Regexp(t, `case\(s\) without a result: "c\d+"`, errOut)

	code, _, errOut = skynet("score", "--metric", example+"metric.py", "--data", data, "--shard", "4/4")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "the index must be from 0 to 3")
}

// A shard killed mid-way is completed by --resume on that shard alone.
func TestShardResume(t *testing.T) {
	const n = 400
	metric, data := slowRun(t, n)
	out := filepath.Join(t.TempDir(), "results-{shard}.jsonl")
	part := strings.ReplaceAll(out, "{shard}", "1")
	cmd := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", out, "--shard", "1/2")
	require.NoError(t, cmd.Start())
	waitLines(t, part, 20)
	require.NoError(t, cmd.Process.Kill())
	cmd.Wait()
	res, err := exec.Command(skynetBin(t), "score", "--metric", metric, "--data", data, "--out", out, "--shard", "1/2", "--resume").CombinedOutput()
	require.NoError(t, err, string(res))
	b, err := os.ReadFile(part)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, r := range resultLines(t, string(b)) {
		require.Nil(t, r.Error, "%+v", r.Error)
		seen[r.ID]++
	}
	want := 0
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("c%d", i)
		if (shardSpec{Index: 1, Count: 2}).takes(id) {
			want++
			assert.Equal(t, 1, seen[id], id)
		}
	}
	assert.Len(t, seen, want, "shard 1's cases, each once, and no other shard's")
}

// skynet eval shards too, and merge --eval reads the dataset as eval does.
func TestEvalShardAndMerge(t *testing.T) {
	dir := t.TempDir()
	args := []string{"eval", "--program", "../../testdata/programs/keywords.py",
		"--artifact", "../../testdata/dataset/keywords.txt", "--metric", "../../testdata/reward/metric.py",
		"--data", "../../testdata/dataset/tickets.csv", "--outputs", "label", "--inputs", "message"}
	code, single, errOut := skynet(args...)
	require.Equal(t, exitOK, code, errOut)
	out := filepath.Join(dir, "r-{shard}.jsonl")
	for k := 0; k < 2; k++ {
		t.Setenv("JOB_COMPLETION_INDEX", fmt.Sprint(k)) // a Kubernetes Indexed Job's task
		code, _, errOut := skynet(append(args, "--out", out, "--shards", "2")...)
		require.Equal(t, exitOK, code, errOut)
	}
	merged := filepath.Join(dir, "merged.jsonl")
	code, _, errOut = skynet("merge", "--eval", "--data", "../../testdata/dataset/tickets.csv", "--out", merged,
		filepath.Join(dir, "r-0.jsonl"), filepath.Join(dir, "r-1.jsonl"))
	require.Equal(t, exitOK, code, errOut)
	want, have := resultLines(t, single), resultFile(t, merged)
	require.Len(t, have, len(want))
	for i := range want {
		assert.Equal(t, want[i].ID, have[i].ID)
		assert.InDelta(t, want[i].Score, have[i].Score, 1e-3, "the reward counts the measured run time")
	}
}
