package main

// The README is held to the code here (make docs-check runs these tests
// alone; make test runs them with the rest):
//   - its flag table lists every flag of check, score, eval and bench, read
//     from each command's own -h output, and no flag they lack; a default
//     it shows is the flag's;
//   - every bin/skynet command in a ```sh block runs from the repository
//     root and exits 0, and an output block right under it shows what it
//     prints (result lines by id, check and summary lines verbatim);
//   - every command in the exit-code table exits with its row's code;
//   - the reward's worked example is the score its command prints;
//   - each Go example's lines are its package's example_test.go's (pool's
//     when it opens a pool, else engine's);
//   - the Go version it names is go.mod's, the make targets it names exist,
//     and its relative links (and those of docs/) lead to files.
// The commands run in process, as the other tests here do; their worker
// processes are this test binary, which package pool's init takes over.

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const repoRoot = "../.."

// fence is a fenced code block of the README.
type fence struct {
	lang  string
	body  []string
	start int // line index of the opening fence
	end   int // line index of the closing fence
}

func readmeText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(repoRoot + "/README.md")
	require.NoError(t, err)
	return string(b)
}

// section is the text under "## title" up to the next "## " heading.
func section(t *testing.T, md, title string) string {
	t.Helper()
	i := strings.Index(md, "\n## "+title+"\n")
	require.GreaterOrEqual(t, i, 0, "README has no section %q", title)
	rest := md[i+1:]
	if j := strings.Index(rest[3:], "\n## "); j >= 0 {
		return rest[:j+3]
	}
	return rest
}

func fences(md string) []fence {
	var out []fence
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		f := fence{lang: strings.TrimSpace(strings.TrimPrefix(lines[i], "```")), start: i}
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			f.body = append(f.body, lines[i])
		}
		f.end = i
		out = append(out, f)
	}
	return out
}

// commands are the bin/skynet lines of a block, continuation lines joined.
func commands(body []string) [][]string {
	var out [][]string
	var cur string
	for _, l := range body {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		cur += l
		if args := strings.Fields(cur); len(args) > 1 && args[0] == "bin/skynet" {
			out = append(out, args[1:])
		}
		cur = ""
	}
	return out
}

// skynetAt runs skynet in process from the repository root, where the
// README's paths start.
func skynetAt(t *testing.T, args []string) (code int, stdout, stderr string) {
	t.Helper()
	t.Chdir(repoRoot)
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// tableRows returns the cells of each row of the first table in text whose
// header row starts with header.
func tableRows(t *testing.T, text, header string) [][]string {
	t.Helper()
	var rows [][]string
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, header):
			in = true
		case in && strings.HasPrefix(l, "|---"):
		case in && strings.HasPrefix(l, "|"):
			cells := strings.Split(strings.Trim(l, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows = append(rows, cells)
		case in:
			return rows
		}
	}
	require.NotEmpty(t, rows, "README has no table with header %q", header)
	return rows
}

var (
	helpFlag = regexp.MustCompile(`^  --([a-z0-9-]+)`)
	helpOld  = regexp.MustCompile(`--([a-z0-9-]+) \(now --`)
	helpDef  = regexp.MustCompile(`\(default ([^()]*)\)$`)
	codeSpan = regexp.MustCompile("`([^`]*)`")
	flagSpan = regexp.MustCompile("`--([a-z0-9-]+)`")
)

// commandFlags reads a command's flags and their printed defaults from its
// -h output: what its flag set really defines.
func commandFlags(t *testing.T, cmd string) map[string]string {
	t.Helper()
	code, out, errOut := skynet(cmd, "-h")
	require.Equal(t, exitOK, code, errOut)
	flags := map[string]string{}
	last := ""
	for _, l := range strings.Split(out+errOut, "\n") {
		for _, m := range helpOld.FindAllStringSubmatch(l, -1) {
			flags[m[1]] = "" // an old name, still accepted
		}
		if m := helpFlag.FindStringSubmatch(l); m != nil {
			last = m[1]
			flags[last] = ""
		} else if m := helpDef.FindStringSubmatch(l); m != nil && last != "" {
			flags[last] = m[1]
		}
	}
	require.NotEmpty(t, flags, "no flags in skynet %s -h", cmd)
	return flags
}

func sameDefault(readme, real string) bool {
	if readme == real {
		return true
	}
	a, errA := time.ParseDuration(readme)
	b, errB := time.ParseDuration(real)
	return errA == nil && errB == nil && a == b
}

func TestDocsFlags(t *testing.T) {
	rows := tableRows(t, section(t, readmeText(t), "Command line"), "| flag |")
	type key struct{ cmd, flag string }
	documented := map[key]bool{}
	for _, r := range rows {
		require.Len(t, r, 4, "flag table row %q", r)
		flags := flagSpan.FindAllStringSubmatch(r[0], -1)
		require.NotEmpty(t, flags, "flag table row names no `--flag`: %q", r)
		defaults := strings.Split(r[2], ", ")
		for i, f := range flags {
			for _, cmd := range strings.Split(r[1], ", ") {
				documented[key{cmd, f[1]}] = true
			}
			if len(defaults) == len(flags) {
				if m := codeSpan.FindStringSubmatch(defaults[i]); m != nil {
					real := commandFlags(t, strings.Split(r[1], ", ")[0])[f[1]]
					assert.True(t, real == "" || sameDefault(m[1], real),
						"README's flag table gives --%s the default %q; the flag's is %q", f[1], m[1], real)
				}
			}
		}
	}
	for _, cmd := range []string{"check", "score", "eval", "bench", "serve"} {
		real := commandFlags(t, cmd)
		for f := range real {
			assert.True(t, documented[key{cmd, f}], "README's flag table (## Command line) has no row for --%s of skynet %s", f, cmd)
		}
		for k := range documented {
			if k.cmd == cmd {
				_, ok := real[k.flag]
				assert.True(t, ok, "README's flag table says skynet %s has --%s; it does not", cmd, k.flag)
			}
		}
	}
	for k := range documented {
		assert.Contains(t, []string{"check", "score", "eval", "bench", "serve"}, k.cmd, "flag table: unknown command for --%s", k.flag)
	}
}

type docResult struct {
	ID       string  `json:"id"`
	Score    float64 `json:"score"`
	Feedback string  `json:"feedback"`
	Error    *struct {
		Kind string `json:"kind"`
	} `json:"error"`
}

func parseResults(t *testing.T, out string) map[string]docResult {
	t.Helper()
	got := map[string]docResult{}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "{") {
			var r docResult
			require.NoError(t, json.Unmarshal([]byte(l), &r), l)
			got[r.ID] = r
		}
	}
	return got
}

// TestDocsCommands runs the README's bin/skynet commands and checks the
// output shown under them.
func TestDocsCommands(t *testing.T) {
	md := readmeText(t)
	fs := fences(md)
	ran := 0
	for i, f := range fs {
		if f.lang != "sh" {
			continue
		}
		for _, args := range commands(f.body) {
			name := strings.Join(args, " ")
			if args[0] == "bench" || args[0] == "stub" {
				continue // bench takes minutes (make bench-cli); stub writes into the tree
			}
			ran++
			t.Run(name, func(t *testing.T) {
				code, out, errOut := skynetAt(t, args)
				require.Equal(t, exitOK, code, "README command `bin/skynet %s` exited %d:\n%s", name, code, errOut)
				if i+1 >= len(fs) || fs[i+1].lang != "" || fs[i+1].start != f.end+1 {
					return
				}
				got := parseResults(t, out)
				all := strings.Split(out+errOut, "\n")
				for _, want := range fs[i+1].body {
					switch {
					case strings.HasPrefix(want, "{"):
						var w docResult
						require.NoError(t, json.Unmarshal([]byte(want), &w), want)
						r, ok := got[w.ID]
						if assert.True(t, ok, "README shows a result %q that `bin/skynet %s` does not print", w.ID, name) {
							assert.InDelta(t, w.Score, r.Score, 1e-9, "score of %s", w.ID)
							assert.Equal(t, w.Feedback, r.Feedback, "feedback of %s", w.ID)
							assert.Equal(t, w.Error == nil, r.Error == nil, "error of %s", w.ID)
						}
					case strings.HasPrefix(want, "ok  "), strings.HasPrefix(want, "FAILED"),
						strings.HasPrefix(want, "mean score:"), strings.HasPrefix(want, "errors:"),
						strings.HasPrefix(want, "named scores:"):
						assert.Contains(t, all, want, "README shows a line `bin/skynet %s` does not print", name)
					}
				}
			})
		}
	}
	assert.GreaterOrEqual(t, ran, 3, "the README's quick start commands were not found in ```sh blocks")
}

// TestDocsExitCodes runs each example of the README's exit-code table.
func TestDocsExitCodes(t *testing.T) {
	rows := tableRows(t, section(t, readmeText(t), "Command line"), "| code |")
	codes := map[int]bool{}
	for _, r := range rows {
		require.Len(t, r, 3, "exit-code row %q", r)
		var want []int
		for _, c := range strings.Split(r[0], ", ") {
			n, err := strconv.Atoi(c)
			require.NoError(t, err, "exit-code row %q", r)
			want = append(want, n)
			codes[n] = true
		}
		for _, m := range codeSpan.FindAllStringSubmatch(r[2], -1) {
			args := strings.Fields(m[1])
			require.Equal(t, "bin/skynet", args[0], "exit-code example %q", m[1])
			require.Len(t, want, 1, "an example needs a row of one code: %q", r)
			t.Run(m[1], func(t *testing.T) {
				code, _, errOut := skynetAt(t, args[1:])
				assert.Equal(t, want[0], code, "README says `%s` exits %d:\n%s", m[1], want[0], errOut)
			})
		}
	}
	for _, c := range []int{exitOK, exitCheck, exitUsage, 130, 143} {
		assert.True(t, codes[c], "the exit-code table has no row for %d", c)
	}
}

var (
	workedCase  = regexp.MustCompile("\\*\\*Worked example\\*\\* \\(case `([^`]+)` of `testdata/reward/`\\)")
	workedTotal = regexp.MustCompile(`= \*\*([0-9.]+)\*\*`)
)

// TestDocsRewardExample: the worked example's total is what its command
// prints for its case.
func TestDocsRewardExample(t *testing.T) {
	md := section(t, readmeText(t), "The `skynet` module and the reward")
	c := workedCase.FindStringSubmatch(md)
	require.NotNil(t, c, "no worked example naming its case")
	total := workedTotal.FindStringSubmatch(md)
	require.NotNil(t, total, "no **total** in the worked example")
	var cmd []string
	for _, f := range fences(md[strings.Index(md, c[0]):]) {
		if f.lang == "sh" {
			cmd = commands(f.body)[0]
			break
		}
	}
	require.NotNil(t, cmd, "no command after the worked example")
	code, out, errOut := skynetAt(t, cmd)
	require.Equal(t, exitOK, code, errOut)
	r, ok := parseResults(t, out)[c[1]]
	require.True(t, ok, "`bin/skynet %s` prints no case %s (add it to testdata/reward/cases.jsonl)", strings.Join(cmd, " "), c[1])
	decimals := len(total[1]) - strings.Index(total[1], ".") - 1
	assert.Equal(t, total[1], strconv.FormatFloat(r.Score, 'f', decimals, 64),
		"the worked example's total is not what `bin/skynet %s` prints for %s", strings.Join(cmd, " "), c[1])
}

// examplePackage is the package whose example_test.go a README Go block
// must match: pool for a block that opens a pool, else engine.
func examplePackage(body []string) string {
	if strings.Contains(strings.Join(body, "\n"), "pool.Open(") {
		return "pool"
	}
	return "engine"
}

// TestDocsGoExample: the README's Go code is the Examples that go test runs.
func TestDocsGoExample(t *testing.T) {
	md := section(t, readmeText(t), "Go API")
	n := 0
	for _, f := range fences(md) {
		if f.lang != "go" {
			continue
		}
		file := examplePackage(f.body) + "/example_test.go"
		b, err := os.ReadFile(repoRoot + "/" + file)
		require.NoError(t, err)
		var have []string
		for _, l := range strings.Split(string(b), "\n") {
			have = append(have, strings.TrimSpace(l))
		}
		for _, l := range f.body {
			if l = strings.TrimSpace(l); l != "" {
				n++
				assert.Contains(t, have, l, "the README's Go example has a line %s does not: keep them the same", file)
			}
		}
	}
	assert.NotZero(t, n, "no ```go block under ## Go API")
}

var (
	goLine     = regexp.MustCompile(`(?m)^go (\S+)$`)
	goMention  = regexp.MustCompile(`\bGo (1\.[0-9]+(\.[0-9]+)?)\b`)
	makeTarget = regexp.MustCompile("(?m)(?:`|^)make ([a-z][a-z-]*)")
	mfTarget   = regexp.MustCompile(`(?m)^([a-z][a-z-]*):`)
	relLink    = regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`)
)

// TestDocsGoVersionTargetsLinks: the Go version is go.mod's; every make
// target named exists; every relative link, here and in docs/, leads to a file.
func TestDocsGoVersionTargetsLinks(t *testing.T) {
	md := readmeText(t)
	mod, err := os.ReadFile(repoRoot + "/go.mod")
	require.NoError(t, err)
	m := goLine.FindSubmatch(mod)
	require.NotNil(t, m, "go.mod has no go line")
	version := string(m[1])
	assert.True(t, strings.Contains(section(t, md, "Install, and the two commands"), "Go "+version),
		"the install section must name go.mod's Go version, Go %s", version)
	for _, g := range goMention.FindAllStringSubmatch(md, -1) {
		assert.Equal(t, version, g[1], "the README names Go %s; go.mod says %s", g[1], version)
	}

	mf, err := os.ReadFile(repoRoot + "/Makefile")
	require.NoError(t, err)
	var targets []string
	for _, m := range mfTarget.FindAllSubmatch(mf, -1) {
		targets = append(targets, string(m[1]))
	}
	for _, m := range makeTarget.FindAllStringSubmatch(md, -1) {
		assert.True(t, slices.Contains(targets, m[1]), "the README names `make %s`; the Makefile has no such target", m[1])
	}

	for _, l := range relLink.FindAllStringSubmatch(md, -1) {
		_, err := os.Stat(repoRoot + "/" + l[1])
		assert.NoError(t, err, "README links to %s", l[1])
	}
	docs, err := filepath.Glob(repoRoot + "/docs/*.md")
	require.NoError(t, err)
	for _, d := range docs {
		b, err := os.ReadFile(d)
		require.NoError(t, err)
		for _, l := range relLink.FindAllStringSubmatch(string(b), -1) {
			_, err := os.Stat(filepath.Join(filepath.Dir(d), l[1]))
			assert.NoError(t, err, "%s links to %s", filepath.Base(d), l[1])
		}
	}
}

// TestDocsGodoc: godoc is the API reference, so every exported name of the
// packages users import (and the fields of their exported structs) says what
// it is for.
func TestDocsGodoc(t *testing.T) {
	for _, dir := range []string{"engine", "reward", "llm", "skynetmod"} {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(repoRoot, dir), func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments)
		require.NoError(t, err)
		for _, p := range pkgs {
			var missing []string
			need := func(name, text string) {
				if strings.TrimSpace(text) == "" {
					missing = append(missing, name)
				}
			}
			d := doc.New(p, dir, 0)
			need("package "+p.Name, d.Doc)
			values := func(vs []*doc.Value) {
				for _, v := range vs {
					for _, s := range v.Decl.Specs {
						vs := s.(*ast.ValueSpec)
						for _, n := range vs.Names {
							if n.IsExported() {
								need(n.Name, v.Doc+vs.Doc.Text()+vs.Comment.Text())
							}
						}
					}
				}
			}
			values(d.Consts)
			values(d.Vars)
			for _, f := range d.Funcs {
				need(f.Name, f.Doc)
			}
			for _, ty := range d.Types {
				need(ty.Name, ty.Doc)
				values(ty.Consts)
				values(ty.Vars)
				for _, f := range ty.Funcs {
					need(f.Name, f.Doc)
				}
				for _, m := range ty.Methods {
					need(ty.Name+"."+m.Name, m.Doc)
				}
				for _, s := range ty.Decl.Specs {
					st, ok := s.(*ast.TypeSpec).Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, f := range st.Fields.List {
						for _, n := range f.Names {
							if n.IsExported() {
								need(ty.Name+"."+n.Name, f.Doc.Text()+f.Comment.Text())
							}
						}
					}
				}
			}
			assert.Empty(t, missing, "exported names of %s/ without a doc comment", dir)
		}
	}
}

// TestDocsGoModule follows the README's "In your own module": for each of
// the README's Go examples, a new module holding it is pointed at this
// checkout, built by the README's commands, and prints what the example
// says it prints. A pool example's workers are that program started again.
func TestDocsGoModule(t *testing.T) {
	if raceEnabled {
		t.Skip("builds and runs a program; the run without -race covers it")
	}
	md := section(t, readmeText(t), "Go API")
	var examples [][]string
	var build []string
	for _, f := range fences(md) {
		switch {
		case f.lang == "go":
			examples = append(examples, f.body)
		case f.lang == "sh" && strings.Contains(strings.Join(f.body, "\n"), "go mod edit -replace"):
			build = f.body
		}
	}
	require.NotEmpty(t, examples, "no ```go block under ## Go API")
	require.NotNil(t, build, "no ```sh block with go mod edit -replace under ## Go API")
	for _, example := range examples {
		pkg := examplePackage(example)
		t.Run(pkg, func(t *testing.T) { goModule(t, example, build) })
	}
}

// goModule builds one README Go example in a module of its own with the
// README's commands, and runs it.
func goModule(t *testing.T, example, build []string) {
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	var body []string
	want := ""
	for _, l := range example {
		if w, ok := strings.CutPrefix(strings.TrimSpace(l), "// Output: "); ok {
			want = w
			continue
		}
		body = append(body, strings.ReplaceAll(l, `"../testdata/`, `"`+root+`/testdata/`))
	}
	require.NotEmpty(t, want, "the Go example has no // Output: line")
	dir := t.TempDir()
	imports := "\t\"github.com/skynetml/skynet/engine\"\n"
	if examplePackage(example) == "pool" {
		imports += "\t\"github.com/skynetml/skynet/pool\"\n"
	}
	src := "package main\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\t\"log\"\n\n" + imports + ")\n\nfunc main() {\n" +
		strings.Join(body, "\n") + "\n}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
	sh := func(line string) (string, error) {
		cmd := exec.Command("bash", "-c", line)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	require.True(t, slices.ContainsFunc(build, func(l string) bool { return strings.HasPrefix(l, "go mod init ") }),
		"the README's commands start no module (go mod init)")
	built := 0
	for _, l := range build {
		line, _, _ := strings.Cut(l, "#")
		line = strings.ReplaceAll(strings.TrimSpace(line), "$HOME/skynet", root)
		if line == "" {
			continue
		}
		if py := regexp.MustCompile(`\$HOME/\.pyenv/\S+`).FindString(line); py != "" {
			home, _ := os.UserHomeDir()
			if _, err := os.Stat(strings.ReplaceAll(py, "$HOME", home)); err != nil {
				t.Logf("not run, %s is not here: %s", py, line)
				continue
			}
		}
		out, err := sh(line)
		require.NoError(t, err, "README: `%s`:\n%s", line, out)
		if strings.Contains(line, "go build") {
			built++
			out, err := sh("./myoptimizer")
			require.NoError(t, err, out)
			assert.Equal(t, want+"\n", out, "`%s`, then ./myoptimizer", line)
		}
	}
	assert.NotZero(t, built, "the README's commands build nothing")
}

// TestDocsNewcomerAnswers: what a newcomer asked and the README did not
// say: how long make test takes, and what ScoreAll's window is (it was
// only in go doc).
func TestDocsNewcomerAnswers(t *testing.T) {
	md := readmeText(t)
	assert.Regexp(t, "`make test` takes about [0-9]+ minutes", section(t, md, "Install, and the two commands"))
	goAPI := section(t, md, "Go API")
	assert.Contains(t, goAPI, "`ScoreAll(ctx, cases, window)`")
	assert.Regexp(t, "`window` is how many cases\\s+may be in flight at once", goAPI)
}
