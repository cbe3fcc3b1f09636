package main

// The deploy/ recipes: the Kubernetes Indexed Job manifest is parsed and
// checked, the sbatch script is run as Slurm would run it (without Slurm,
// always) and, with SKYNET_SLURM_TEST=1, under a real Slurm on localhost.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

const (
	k8sManifest  = "../../deploy/k8s/indexed-job.yaml"
	sbatchScript = "../../deploy/slurm/skynet-array.sbatch"
	slurmLocal   = "../../build/slurm-local.sh"
)

// k8sJob is the part of batch/v1 Job the manifest may use. It is decoded
// with KnownFields, so a misspelt field (completionmode, parallelisms) is an
// error here rather than something kubectl drops or rejects on the cluster.
type k8sJob struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Metadata   k8sMetadata `yaml:"metadata"`
	Spec       struct {
		CompletionMode       string `yaml:"completionMode"`
		Completions          *int   `yaml:"completions"`
		Parallelism          *int   `yaml:"parallelism"`
		BackoffLimit         *int   `yaml:"backoffLimit"`
		BackoffLimitPerIndex *int   `yaml:"backoffLimitPerIndex"`
		MaxFailedIndexes     *int   `yaml:"maxFailedIndexes"`
		TTLSecondsAfterDone  *int   `yaml:"ttlSecondsAfterFinished"`
		Template             struct {
			Metadata k8sMetadata `yaml:"metadata"`
			Spec     struct {
				RestartPolicy  string         `yaml:"restartPolicy"`
				InitContainers []k8sContainer `yaml:"initContainers"`
				Containers     []k8sContainer `yaml:"containers"`
				Volumes        []k8sVolume    `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sVolume struct {
	Name string    `yaml:"name"`
	PVC  *struct { // persistentVolumeClaim
		ClaimName string `yaml:"claimName"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"persistentVolumeClaim"`
	HostPath *struct {
		Path string `yaml:"path"`
		Type string `yaml:"type"`
	} `yaml:"hostPath"`
}

type k8sMetadata struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string         `yaml:"name"`
		Value     string         `yaml:"value"`
		ValueFrom map[string]any `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom   []map[string]any `yaml:"envFrom"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"` // a number or a port's name
	} `yaml:"httpGet"`
	InitialDelaySeconds int `yaml:"initialDelaySeconds"`
	PeriodSeconds       int `yaml:"periodSeconds"`
	FailureThreshold    int `yaml:"failureThreshold"`
	TimeoutSeconds      int `yaml:"timeoutSeconds"`
}

// flagValue is the value after name in argv ("--out X" or "--out=X").
func flagValue(argv []string, name string) (string, bool) {
	for i, a := range argv {
		if a == name && i+1 < len(argv) {
			return argv[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func hasFlag(argv []string, name string) bool {
	for _, a := range argv {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

func TestDeployK8sIndexedJob(t *testing.T) {
	f, err := os.Open(k8sManifest)
	require.NoError(t, err)
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var job k8sJob
	require.NoError(t, dec.Decode(&job), "a field the test does not know is a misspelling or needs adding to k8sJob")
	var more k8sJob
	require.ErrorIs(t, dec.Decode(&more), io.EOF, "one document: the Job")

	assert.Equal(t, "batch/v1", job.APIVersion)
	assert.Equal(t, "Job", job.Kind)
	assert.NotEmpty(t, job.Metadata.Name)
	s := job.Spec
	assert.Equal(t, "Indexed", s.CompletionMode, "JOB_COMPLETION_INDEX is set only in an Indexed Job")
	require.NotNil(t, s.Completions, "spec.completions")
	require.NotNil(t, s.Parallelism, "spec.parallelism")
	n := *s.Completions
	assert.Greater(t, n, 1)
	assert.Equal(t, n, *s.Parallelism, "one pod per shard at once")
	pod := s.Template.Spec
	assert.Contains(t, []string{"Never", "OnFailure"}, pod.RestartPolicy, "a Job's pods must not restart Always")
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.NotEmpty(t, c.Image)

	// The index comes from Kubernetes alone; the count from SKYNET_SHARDS.
	env := map[string]string{}
	for _, ct := range append(append([]k8sContainer{}, pod.InitContainers...), pod.Containers...) {
		assert.Empty(t, ct.EnvFrom, "envFrom could set JOB_COMPLETION_INDEX or SKYNET_SHARDS out of sight")
		for _, e := range ct.Env {
			assert.NotEqual(t, "JOB_COMPLETION_INDEX", e.Name, "Kubernetes sets JOB_COMPLETION_INDEX in an Indexed Job's pods; setting it by hand gives every pod the same shard")
		}
	}
	for _, e := range c.Env {
		assert.Nil(t, e.ValueFrom, e.Name)
		env[e.Name] = e.Value
	}
	require.Contains(t, env, "SKYNET_SHARDS")
	assert.Equal(t, strconv.Itoa(n), env["SKYNET_SHARDS"], "SKYNET_SHARDS must equal completions")

	argv := append(append([]string{}, c.Command...), c.Args...)
	require.GreaterOrEqual(t, len(argv), 2)
	assert.Equal(t, "skynet", filepath.Base(argv[0]), "the container runs the skynet binary")
	assert.Equal(t, "score", argv[1])
	out, ok := flagValue(argv, "--out")
	require.True(t, ok, "--out")
	assert.Contains(t, out, "{shard}", "each pod writes its own results file")
	assert.True(t, hasFlag(argv, "--resume"), "a retried pod resumes its shard")
	assert.False(t, hasFlag(argv, "--shard"), "the shard comes from JOB_COMPLETION_INDEX, not a fixed --shard")
	for _, fl := range []string{"--metric", "--data"} {
		_, ok := flagValue(argv, fl)
		assert.True(t, ok, fl)
	}

	// Image-agnostic: the binary, the metric and the cases are on mounted
	// volumes, and every mount names a volume of the pod.
	vols := map[string]bool{}
	for _, v := range pod.Volumes {
		assert.True(t, v.PVC != nil || v.HostPath != nil, "volume %s: a PVC or a hostPath", v.Name)
		vols[v.Name] = true
	}
	mounted := func(path string) bool {
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
				return true
			}
		}
		return false
	}
	for _, m := range c.VolumeMounts {
		assert.True(t, vols[m.Name], "volumeMount %s names no volume", m.Name)
	}
	metric, _ := flagValue(argv, "--metric")
	data, _ := flagValue(argv, "--data")
	for _, p := range []string{argv[0], metric, data, out} {
		assert.True(t, mounted(p), "%s is not on a mounted volume", p)
	}

	// What each pod would score: shard i of n, by the same code skynet runs.
	outs := map[string]bool{}
	for i := 0; i < n; i++ {
		getenv := func(k string) string {
			if k == "JOB_COMPLETION_INDEX" {
				return strconv.Itoa(i)
			}
			return env[k]
		}
		shards := 0
		if v, ok := flagValue(argv, "--shards"); ok {
			shards, err = strconv.Atoi(v)
			require.NoError(t, err)
		}
		spec, ok, err := shardFromEnv(getenv, shards)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, shardSpec{Index: i, Count: n, From: spec.From}, spec)
		outs[spec.outPath(out)] = true
	}
	assert.Len(t, outs, n, "each pod its own --out")
}

// sbatchArray is the --array directive's range: 0-3 is (0, 3).
func sbatchArray(t *testing.T, script []byte) (lo, hi int) {
	t.Helper()
	var arrays []string
	sc := bufio.NewScanner(bytes.NewReader(script))
	for first := true; sc.Scan(); first = false {
		line := strings.TrimSpace(sc.Text())
		if first && strings.HasPrefix(line, "#!") || line == "" {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break // sbatch reads no #SBATCH line after the first command
		}
		if v, ok := strings.CutPrefix(line, "#SBATCH --array="); ok {
			arrays = append(arrays, v)
		}
	}
	require.Len(t, arrays, 1, "one #SBATCH --array= directive before the script's first command")
	m := regexp.MustCompile(`^(\d+)-(\d+)(%\d+)?$`).FindStringSubmatch(strings.Fields(arrays[0])[0])
	require.NotNil(t, m, "--array=%s: want LO-HI", arrays[0])
	lo, _ = strconv.Atoi(m[1])
	hi, _ = strconv.Atoi(m[2])
	require.Less(t, lo, hi)
	return lo, hi
}

func TestDeploySbatchScript(t *testing.T) {
	script, err := os.ReadFile(sbatchScript)
	require.NoError(t, err)
	out, err := exec.Command("bash", "-n", sbatchScript).CombinedOutput()
	require.NoError(t, err, "bash -n: %s", out)
	lo, hi := sbatchArray(t, script)
	assert.Equal(t, 0, lo, "shards are numbered from 0")
	assert.Equal(t, 3, hi, "4 tasks")
	for _, want := range []string{" score ", "results-{shard}.jsonl", "--resume", " merge --data "} {
		assert.True(t, bytes.Contains(script, []byte(want)), "%s has no %q", sbatchScript, want)
	}

	// Run as Slurm runs it, with a stand-in skynet that prints its argv.
	dir := t.TempDir()
	fake := writeFile(t, dir, "skynet", "#!/bin/sh\nfor a; do echo \"$a\"; done\n")
	require.NoError(t, os.Chmod(fake, 0o755))
	metric := writeFile(t, dir, "metric.py", "")
	data := writeFile(t, dir, "cases.jsonl", "")
	base := map[string]string{
		"SKYNET": fake, "METRIC": metric, "DATA": data, "OUT_DIR": filepath.Join(dir, "out"),
		"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3",
	}
	runScript := func(env map[string]string, drop ...string) (int, []string, string) {
		cmd := exec.Command("bash", sbatchScript)
		cmd.Env = arrayFreeEnv()
	next:
		for k, v := range env {
			for _, d := range drop {
				if k == d {
					continue next
				}
			}
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return code, strings.Fields(o.String()), e.String()
	}
	code, argv, stderr := runScript(base)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, []string{"score", "--metric", metric, "--data", data,
		"--out", filepath.Join(dir, "out", "results-{shard}.jsonl"), "--resume"}, argv)
	assert.DirExists(t, filepath.Join(dir, "out"))

	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	code, argv, stderr = runScript(with("SKYNET_SHARDS", "4", "SKYNET_ARGS", "--workers 3 --timeout 5s"))
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, []string{"--shard", "2/4", "--workers", "3", "--timeout", "5s"}, argv[len(argv)-6:])

	// Each missing setting is named.
	for _, v := range []string{"SKYNET", "METRIC", "DATA", "OUT_DIR"} {
		code, _, stderr = runScript(base, v)
		assert.Equal(t, 2, code, v)
		assert.Contains(t, stderr, "set "+v+" to ", v)
	}
	code, _, stderr = runScript(with("DATA", filepath.Join(dir, "nope.jsonl")))
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "DATA=")
	code, _, stderr = runScript(base, "SLURM_ARRAY_TASK_ID")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--array")
}

// arrayFreeEnv is this process's environment without anything that would
// make skynet (or sbatch) think it is one task of an array, for when the
// tests themselves run inside a Slurm job or a Kubernetes pod.
func arrayFreeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "SBATCH_") || k == "JOB_COMPLETION_INDEX" ||
			k == "SKYNET_SHARDS" || k == "SKYNET_ARGS" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// shardResult is what a merged run and a single run must agree on.
type shardResult struct {
	ID       string          `json:"id"`
	Score    float64         `json:"score"`
	Feedback string          `json:"feedback"`
	Error    json.RawMessage `json:"error"`
}

func readResults(t *testing.T, path string) []shardResult { return jsonFile[shardResult](t, path) }

// arrayCases writes testdata/exact_match's cases 34 times over (204 cases,
// unique ids).
func arrayCases(t *testing.T, dir string) (metric, data string) {
	t.Helper()
	metric, err := filepath.Abs("../../testdata/exact_match/metric.py")
	require.NoError(t, err)
	b, err := os.ReadFile("../../testdata/exact_match/cases.jsonl")
	require.NoError(t, err)
	data = filepath.Join(dir, "cases.jsonl")
	require.NoError(t, os.WriteFile(data, uniqueIDs(t, b, 34), 0o644))
	return metric, data
}

// mergeEqualsSingle merges the parts in outDir, runs skynet score once over
// the whole file, and checks the two agree id for id.
func mergeEqualsSingle(t *testing.T, bin, metric, data, outDir string, tasks int) {
	t.Helper()
	var parts []string
	for i := 0; i < tasks; i++ {
		p := filepath.Join(outDir, "results-"+strconv.Itoa(i)+".jsonl")
		require.FileExists(t, p, "task %d wrote no results", i)
		assert.NotEmpty(t, readResults(t, p), "shard %d is empty", i)
		parts = append(parts, p)
	}
	merged := filepath.Join(outDir, "results.jsonl")
	cmd := exec.Command(bin, append([]string{"merge", "--data", data, "--out", merged}, parts...)...)
	cmd.Env = arrayFreeEnv()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "skynet merge: %s", out)
	assert.Regexp(t, `merged \d+ result\(s\) from `+strconv.Itoa(tasks)+` part\(s\)\n`, string(out))

	single := filepath.Join(t.TempDir(), "single.jsonl")
	cmd = exec.Command(bin, "score", "--metric", metric, "--data", data, "--out", single)
	cmd.Env = arrayFreeEnv()
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "skynet score: %s", out)

	want, got := readResults(t, single), readResults(t, merged)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i], got[i], "line %d", i+1)
	}
}

// The sbatch script's 4 tasks, run one after another with the variables
// Slurm gives an array task, merge into what one skynet score gives: the
// Slurm test below without Slurm, so it never skips.
func TestDeploySbatchTasksMerge(t *testing.T) {
	bin := skynetBin(t)
	dir := t.TempDir()
	metric, data := arrayCases(t, dir)
	outDir := filepath.Join(dir, "out")
	for i := 0; i < 4; i++ {
		cmd := exec.Command("bash", sbatchScript)
		cmd.Env = append(arrayFreeEnv(), "SKYNET="+bin, "METRIC="+metric, "DATA="+data, "OUT_DIR="+outDir,
			"SLURM_ARRAY_TASK_ID="+strconv.Itoa(i), "SLURM_ARRAY_TASK_COUNT=4",
			"SLURM_ARRAY_TASK_MIN=0", "SLURM_ARRAY_TASK_MAX=3")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "task %d: %s", i, out)
		assert.Contains(t, string(out), "shard "+strconv.Itoa(i)+" of 4")
	}
	mergeEqualsSingle(t, bin, metric, data, outDir, 4)
}

// TestSlurmArray submits deploy/slurm/skynet-array.sbatch to a real Slurm
// (slurmctld and slurmd on localhost, started by build/slurm-local.sh) as a
// 4-task array, waits, merges, and compares with a single run.
func TestSlurmArray(t *testing.T) {
	if os.Getenv("SKYNET_SLURM_TEST") != "1" {
		t.Skip("a real Slurm on localhost: run make test-slurm (SKYNET_SLURM_TEST=1 go test -count=1 -run TestSlurmArray ./cmd/skynet); as root it installs slurm-wlm and munge with apt-get")
	}
	if os.Geteuid() != 0 {
		t.Skip("Slurm on localhost needs root (SlurmUser=root; slurmd runs the tasks)")
	}
	_, errApt := exec.LookPath("apt-get")
	_, errSlurm := exec.LookPath("slurmctld")
	if errApt != nil && errSlurm != nil {
		t.Skip("Slurm is not installed and there is no apt-get to install slurm-wlm and munge")
	}
	bin := skynetBin(t)
	dir := t.TempDir()
	metric, data := arrayCases(t, dir)
	outDir := filepath.Join(dir, "out")

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "bash", slurmLocal, "run", sbatchScript, "--array=0-3")
	cmd.Env = append(arrayFreeEnv(), "SKYNET="+bin, "METRIC="+metric, "DATA="+data, "OUT_DIR="+outDir,
		"SLURM_LOCAL_TIMEOUT=600")
	// SIGTERM, not SIGKILL, on timeout: the script's trap stops the daemons.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 77 {
		t.Skipf("Slurm cannot run here: %s", out)
	}
	require.NoError(t, err, "build/slurm-local.sh run: %s", out)
	t.Logf("Slurm up, 4 array tasks, down: %s\n%s", time.Since(start).Round(time.Millisecond), out)
	mergeEqualsSingle(t, bin, metric, data, outDir, 4)
}
