package main

// Sharding a run over a cluster's job array: each task scores the cases
// whose id hashes to its shard, and skynet merge puts the parts together.

import (
	"flag"
	"fmt"
	"hash/fnv"
	"iter"
	"os"
	"strconv"
	"strings"
)

// shardSpec says which part of a run this process takes: shard Index of
// Count (0 <= Index < Count), and where that came from, for the summary.
type shardSpec struct {
	Index, Count int
	From         string
}

// whole is the spec of an unsharded run.
var whole = shardSpec{Index: 0, Count: 1}

// takes says whether the case with this id is in the shard. A case goes by
// a hash of its id (FNV-1a), not its position: the same case stays in the
// same shard when cases are added to or reordered in the file, so each
// shard's --resume still holds, and a merge needs no positions.
func (s shardSpec) takes(id string) bool {
	if s.Count <= 1 {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()%uint64(s.Count) == uint64(s.Index)
}

// outPath puts the shard's index in place of {shard}.
func (s shardSpec) outPath(out string) string {
	return strings.ReplaceAll(out, "{shard}", strconv.Itoa(s.Index))
}

func (s shardSpec) String() string {
	return fmt.Sprintf("shard %d of %d (%s)", s.Index, s.Count, s.From)
}

// parseShard reads "I/N".
func parseShard(v string) (shardSpec, error) {
	i, n, ok := strings.Cut(v, "/")
	if !ok {
		return shardSpec{}, fmt.Errorf("--shard %q: want I/N, e.g. 0/4 (shard I of N, I from 0 to N-1)", v)
	}
	return checkShard(i, n, "--shard "+v)
}

func checkShard(i, n, from string) (shardSpec, error) {
	idx, err1 := strconv.Atoi(strings.TrimSpace(i))
	cnt, err2 := strconv.Atoi(strings.TrimSpace(n))
	switch {
	case err1 != nil || err2 != nil:
		return shardSpec{}, fmt.Errorf("%s: the index and count must be whole numbers", from)
	case cnt < 1:
		return shardSpec{}, fmt.Errorf("%s: the count must be at least 1, got %d", from, cnt)
	case idx < 0 || idx >= cnt:
		return shardSpec{}, fmt.Errorf("%s: the index must be from 0 to %d, got %d", from, cnt-1, idx)
	}
	return shardSpec{Index: idx, Count: cnt, From: from}, nil
}

// shardFromEnv finds the shard of a job-array task: Slurm's
// SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT (or its MIN and MAX), or
// Kubernetes' JOB_COMPLETION_INDEX with the count from --shards or
// SKYNET_SHARDS. ok is false outside an array.
func shardFromEnv(getenv func(string) string, shards int) (s shardSpec, ok bool, err error) {
	if id := getenv("SLURM_ARRAY_TASK_ID"); id != "" {
		if count := getenv("SLURM_ARRAY_TASK_COUNT"); count != "" {
			// Task ids may start elsewhere than 0 (--array=1-4): shift by MIN.
			idx, err := strconv.Atoi(id)
			if err != nil {
				return s, false, fmt.Errorf("SLURM_ARRAY_TASK_ID=%q is not a number", id)
			}
			if lo := getenv("SLURM_ARRAY_TASK_MIN"); lo != "" {
				min, err := strconv.Atoi(lo)
				if err != nil {
					return s, false, fmt.Errorf("SLURM_ARRAY_TASK_MIN=%q is not a number", lo)
				}
				idx -= min
			}
			s, err = checkShard(strconv.Itoa(idx), count, "SLURM_ARRAY_TASK_ID="+id+" of SLURM_ARRAY_TASK_COUNT="+count)
			return s, err == nil, err
		}
		lo, hi := getenv("SLURM_ARRAY_TASK_MIN"), getenv("SLURM_ARRAY_TASK_MAX")
		if lo == "" || hi == "" {
			count, from := countOf(getenv, shards)
			if count == "" {
				return s, false, fmt.Errorf("SLURM_ARRAY_TASK_ID=%s is set but not how many tasks the array has (neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MIN/MAX are): pass --shards N or set SKYNET_SHARDS (task ids from 0), or pass --shard I/N", id)
			}
			s, err = checkShard(id, count, "SLURM_ARRAY_TASK_ID="+id+" of "+from)
			return s, err == nil, err
		}
		idx, e1 := strconv.Atoi(id)
		min, e2 := strconv.Atoi(lo)
		max, e3 := strconv.Atoi(hi)
		if e1 != nil || e2 != nil || e3 != nil {
			return s, false, fmt.Errorf("SLURM_ARRAY_TASK_ID/MIN/MAX (%s, %s, %s) must be numbers", id, lo, hi)
		}
		s, err = checkShard(strconv.Itoa(idx-min), strconv.Itoa(max-min+1), fmt.Sprintf("SLURM_ARRAY_TASK_ID=%s in %s-%s", id, lo, hi))
		return s, err == nil, err
	}
	if idx := getenv("JOB_COMPLETION_INDEX"); idx != "" {
		count, from := countOf(getenv, shards)
		if count == "" {
			return s, false, fmt.Errorf("JOB_COMPLETION_INDEX=%s is set (a Kubernetes Indexed Job) but not how many shards there are: pass --shards N or set SKYNET_SHARDS (the Job's completions)", idx)
		}
		s, err = checkShard(idx, count, "JOB_COMPLETION_INDEX="+idx+" of "+from)
		return s, err == nil, err
	}
	return s, false, nil
}

// countOf is the shard count --shards (when not 0) or SKYNET_SHARDS gives,
// and which said it; "" when neither does.
func countOf(getenv func(string) string, shards int) (count, from string) {
	if shards != 0 {
		return strconv.Itoa(shards), "--shards " + strconv.Itoa(shards)
	}
	if count = getenv("SKYNET_SHARDS"); count != "" {
		return count, "SKYNET_SHARDS=" + count
	}
	return "", ""
}

// shardFlags are --shard and --shards.
type shardFlags struct {
	shard  *string
	shards *int
}

func addShardFlags(fs *flag.FlagSet) shardFlags {
	return shardFlags{
		shard:  fs.String("shard", "", "score only shard I of N (I/N, I from 0): the cases whose id hashes to I; default from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX. --out may hold {shard}"),
		shards: fs.Int("shards", 0, "how many shards a job array has, for JOB_COMPLETION_INDEX or a SLURM_ARRAY_TASK_ID without SLURM_ARRAY_TASK_COUNT (default SKYNET_SHARDS)"),
	}
}

// spec resolves the shard: the flag, else the environment, else the whole
// run. --shards that disagrees with --shard's count is refused: one of the
// two is wrong, and the parts would not merge.
func (f shardFlags) spec() (shardSpec, error) {
	if *f.shard != "" {
		s, err := parseShard(*f.shard)
		if err == nil && *f.shards != 0 && *f.shards != s.Count {
			return s, fmt.Errorf("--shard %s is shard %d of %d, but --shards says %d: give the count once (--shards is for JOB_COMPLETION_INDEX or a SLURM_ARRAY_TASK_ID without a count)", *f.shard, s.Index, s.Count, *f.shards)
		}
		return s, err
	}
	s, ok, err := shardFromEnv(os.Getenv, *f.shards)
	if err != nil || !ok {
		return whole, err
	}
	return s, nil
}

// filter keeps the ids of the shard.
func (s shardSpec) filter(ids iter.Seq[string]) iter.Seq[string] {
	return func(yield func(string) bool) {
		for id := range ids {
			if s.takes(id) && !yield(id) {
				return
			}
		}
	}
}

// of names the shard's part of the data, for messages.
func (s shardSpec) of(data string) string {
	if s.Count <= 1 {
		return data
	}
	return fmt.Sprintf("%s's shard %d of %d", data, s.Index, s.Count)
}
