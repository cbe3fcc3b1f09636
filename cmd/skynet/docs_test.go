package main

// The README and docs/ are held to the code here (make docs-check runs these
// tests alone; make test runs them with the rest):
//   - the README stays a guide read top to bottom: at most 250 lines, its
//     sections in the order issue 47 asked for;
//   - docs/cli.md's flag table lists every flag of every command (merge's
//     too), read from each command's own -h output, and no flag they lack,
//     with the old names on the line -h prints; the README's short table
//     names only flags its commands have; a default either shows is the
//     flag's;
//   - every bin/skynet command in the README's ```sh blocks, and every other
//     one it shows, is run: from the repository root, exiting 0 (the
//     exit-code table's with their row's code), and an output block right
//     under a block shows what its commands print (result lines by id, check
//     and summary lines verbatim); the serve block starts skynet serve and
//     runs its curl commands, and the Python client block runs against it;
//     every other line of a ```sh block is one a test runs;
//   - the reward's worked example (docs/metrics.md) is the score its
//     command prints, with the result lines shown;
//   - the README's Go example is a whole program, gofmt'ed, whose lines are
//     pool's example_test.go's; it builds as pasted in a module of its own
//     with the README's commands and prints what it says;
//   - the Go version named is go.mod's, the make targets named exist, and
//     every relative link (of the README and of docs/) leads to a file and,
//     with an #anchor, to a heading of it;
//   - the troubleshooting table quotes messages the code prints, and the
//     dependencies section names every module go.mod requires.
// The commands run in process, as the other tests here do; their worker
// processes are this test binary, which package pool's init takes over.

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/doc"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const repoRoot = "../.."

// repoAbs is the repository's root as an absolute path, for tests that
// change directory.
var repoAbs = func() string {
	p, err := filepath.Abs(repoRoot)
	if err != nil {
		panic(err)
	}
	return p
}()

// readmeMaxLines is issue 47's bound: a newcomer needed about 150 lines of
// the 628 the README had.
const readmeMaxLines = 250

// readmeSections are the README's sections, in the order it is read.
var readmeSections = []string{"Quick start", "The contract", "Commands", "Serving over HTTP", "Go API",
	"Troubleshooting", "Performance", "Limits", "Dependencies"}

// fence is a fenced code block of a markdown file.
type fence struct {
	lang  string
	body  []string
	start int // line index of the opening fence
	end   int // line index of the closing fence
}

// docText is a file of the repository, by its path from the root.
func docText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoAbs, path))
	require.NoError(t, err)
	return string(b)
}

func readmeText(t *testing.T) string {
	t.Helper()
	return docText(t, "README.md")
}

// section is the text under heading (such as "## Commands" or "### Reward:
// accuracy, speed and cost") up to the next heading of its level or above.
func section(t *testing.T, md, heading string) string {
	t.Helper()
	i := strings.Index(md, "\n"+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "no section %q", heading)
	rest := md[i+1:]
	level := strings.Index(heading, " ") // the count of #
	next := len(rest)
	lines := strings.SplitAfter(rest, "\n")
	at, inFence := len(lines[0]), false
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if !inFence && strings.HasPrefix(l, "#") {
			if n := len(l) - len(strings.TrimLeft(l, "#")); n <= level && strings.HasPrefix(l[n:], " ") {
				next = at
				break
			}
		}
		at += len(l)
	}
	return rest[:next]
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

// shellComment is a comment at the end of a shell line: a # after a space,
// outside quotes.
func stripComment(l string) string {
	quote := rune(0)
	for i, r := range l {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || l[i-1] == ' '):
			return strings.TrimSpace(l[:i])
		}
	}
	return strings.TrimSpace(l)
}

// shellLines are a block's lines, continuation lines joined, comments and
// blank lines left out.
func shellLines(body []string) []string {
	var out []string
	cur := ""
	for _, l := range body {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		if line := stripComment(cur + l); line != "" {
			out = append(out, line)
		}
		cur = ""
	}
	return out
}

// commands are the bin/skynet lines of a block, as arguments (a trailing &
// left out).
func commands(body []string) [][]string {
	var out [][]string
	for _, l := range shellLines(body) {
		args := strings.Fields(strings.TrimSuffix(l, "&"))
		if len(args) > 1 && args[0] == "bin/skynet" {
			out = append(out, args[1:])
		}
	}
	return out
}

// skynetAt runs skynet in process from the repository root, where the
// README's paths start.
func skynetAt(t *testing.T, args []string) (code int, stdout, stderr string) {
	t.Helper()
	t.Chdir(repoAbs)
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
	require.NotEmpty(t, rows, "no table with header %q", header)
	return rows
}

var (
	helpFlag = regexp.MustCompile(`^  --([a-z0-9-]+)`)
	helpOld  = regexp.MustCompile(`--([a-z0-9-]+) \(now --([a-z0-9-]+)\)`)
	helpDef  = regexp.MustCompile(`\(default ([^()]*)\)$`)
	codeSpan = regexp.MustCompile("`([^`]*)`")
	flagSpan = regexp.MustCompile("`--([a-z0-9-]+)`")
)

// helpFlagInfo is what a command's -h says of one flag.
type helpFlagInfo struct {
	def  string // its printed default, "(default X)" at the end of its line
	line string // its whole line
}

// helpOf reads a command's flags, their printed defaults, and its line
// of old names, from its -h output: what its flag set really defines.
func helpOf(t *testing.T, cmd string) (flags map[string]helpFlagInfo, oldLine string) {
	t.Helper()
	code, out, errOut := skynet(cmd, "-h")
	require.Equal(t, exitOK, code, errOut)
	flags = map[string]helpFlagInfo{}
	for _, l := range strings.Split(out+errOut, "\n") {
		if strings.HasPrefix(l, "old names, still accepted: ") {
			oldLine = l
		}
		if m := helpFlag.FindStringSubmatch(l); m != nil {
			info := helpFlagInfo{line: l}
			if d := helpDef.FindStringSubmatch(l); d != nil {
				info.def = d[1]
			}
			flags[m[1]] = info
		}
	}
	require.NotEmpty(t, flags, "no flags in skynet %s -h", cmd)
	return flags, oldLine
}

func sameDefault(doc, real string) bool {
	if doc == real {
		return true
	}
	a, errA := time.ParseDuration(doc)
	b, errB := time.ParseDuration(real)
	return errA == nil && errB == nil && a == b
}

// flagCommands are the commands with flags; docs/cli.md's table covers them
// all.
var flagCommands = []string{"check", "score", "eval", "bench", "serve", "merge", "compare", "report"}

// checkFlagTable holds a flag table (name: where it is) to the commands' -h:
// every flag it names exists for each command of its row, with the default
// it shows; complete, it also names every flag of every command but the old
// names, which oldLine must list as -h does.
func checkFlagTable(t *testing.T, name, text string, complete bool, oldLine string) {
	help := map[string]map[string]helpFlagInfo{}
	olds := map[string]string{}
	for _, cmd := range flagCommands {
		help[cmd], olds[cmd] = helpOf(t, cmd)
	}
	type key struct{ cmd, flag string }
	documented := map[key]bool{}
	for _, r := range tableRows(t, text, "| flag |") {
		require.Len(t, r, 4, "%s: flag table row %q", name, r)
		flags := flagSpan.FindAllStringSubmatch(r[0], -1)
		require.NotEmpty(t, flags, "%s: flag table row names no `--flag`: %q", name, r)
		cmds := strings.Split(r[1], ", ")
		defaults := strings.Split(r[2], ", ")
		for i, f := range flags {
			for _, cmd := range cmds {
				require.Contains(t, flagCommands, cmd, "%s: flag table: unknown command for --%s", name, f[1])
				documented[key{cmd, f[1]}] = true
				info, ok := help[cmd][f[1]]
				if !assert.True(t, ok, "%s's flag table says skynet %s has --%s; it does not", name, cmd, f[1]) {
					continue
				}
				if len(defaults) != len(flags) {
					continue
				}
				m := codeSpan.FindStringSubmatch(defaults[i])
				switch {
				case m == nil:
				case strings.HasPrefix(m[1], "--"): // the default is another flag's value
					assert.Contains(t, info.line, "default: "+m[1],
						"%s's flag table gives --%s of skynet %s the default %s; its -h does not", name, f[1], cmd, m[1])
				default:
					assert.True(t, info.def == "" || sameDefault(m[1], info.def),
						"%s's flag table gives --%s of skynet %s the default %q; the flag's is %q", name, f[1], cmd, m[1], info.def)
				}
			}
		}
	}
	if !complete {
		return
	}
	docOld := helpOld.FindAllStringSubmatch(oldLine, -1)
	require.NotEmpty(t, docOld, "%s has no line of old names", name)
	for _, cmd := range flagCommands {
		for f := range help[cmd] {
			assert.True(t, documented[key{cmd, f}], "%s's flag table has no row for --%s of skynet %s", name, f, cmd)
		}
		if olds[cmd] == "" {
			continue
		}
		assert.Equal(t, olds[cmd], oldLine, "%s's line of old names is not skynet %s -h's", name, cmd)
		for _, m := range docOld {
			assert.False(t, documented[key{cmd, m[1]}], "%s: --%s is an old name: it belongs on the old names' line, not in the table", name, m[1])
			assert.True(t, documented[key{cmd, m[2]}], "%s: --%s is now --%s, which has no row for skynet %s", name, m[1], m[2], cmd)
		}
	}
}

// TestDocsFlags: docs/cli.md's flag table is every command's flags, the
// README's short one a true part of it.
func TestDocsFlags(t *testing.T) {
	cli := section(t, docText(t, "docs/cli.md"), "## Flags")
	oldLine := ""
	for _, l := range strings.Split(cli, "\n") {
		if strings.HasPrefix(l, "old names, still accepted: ") {
			oldLine = l
		}
	}
	checkFlagTable(t, "docs/cli.md", cli, true, oldLine)
	checkFlagTable(t, "README.md", section(t, readmeText(t), "## Commands"), false, "")
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

// checkShown holds an output block (shown) to what a block's commands
// printed (out, their stdout; errOut, their stderr): each result line by its
// id, each check and summary line verbatim.
func checkShown(t *testing.T, name string, shown []string, out, errOut string) {
	t.Helper()
	got := parseResults(t, out)
	all := strings.Split(out+errOut, "\n")
	for _, want := range shown {
		switch {
		case strings.HasPrefix(want, "{"):
			var w docResult
			require.NoError(t, json.Unmarshal([]byte(want), &w), want)
			r, ok := got[w.ID]
			if assert.True(t, ok, "the docs show a result %q that `%s` does not print", w.ID, name) {
				assert.InDelta(t, w.Score, r.Score, 1e-9, "score of %s", w.ID)
				assert.Equal(t, w.Feedback, r.Feedback, "feedback of %s", w.ID)
				assert.Equal(t, w.Error == nil, r.Error == nil, "error of %s", w.ID)
			}
		case strings.HasPrefix(want, "ok  "), strings.HasPrefix(want, "FAILED"),
			strings.HasPrefix(want, "mean score:"), strings.HasPrefix(want, "errors:"),
			strings.HasPrefix(want, "named scores:"):
			assert.Contains(t, all, want, "the docs show a line `%s` does not print", name)
		}
	}
}

// shownUnder is the output block right under fence i, if there is one.
func shownUnder(fs []fence, i int) []string {
	if i+1 < len(fs) && fs[i+1].lang == "" && fs[i+1].start == fs[i].end+1 {
		return fs[i+1].body
	}
	return nil
}

var exitRow = regexp.MustCompile(`^\| [0-9]`)

// inlineCommands are the README's bin/skynet commands in `code spans` outside
// its blocks and its exit-code table, whose examples TestDocsExitCodes runs.
func inlineCommands(md string) [][]string {
	var out [][]string
	inFence := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if inFence || exitRow.MatchString(l) {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(l, -1) {
			if args := strings.Fields(m[1]); len(args) > 1 && args[0] == "bin/skynet" {
				out = append(out, args[1:])
			}
		}
	}
	return out
}

// TestDocsCommands runs every bin/skynet command the README shows, and
// checks the output shown under a block against what its commands print.
func TestDocsCommands(t *testing.T) {
	md := readmeText(t)
	fs := fences(md)
	ran := 0
	for i, f := range fs {
		if f.lang != "sh" {
			continue
		}
		cmds := commands(f.body)
		if len(cmds) == 0 {
			continue
		}
		if cmds[0][0] == "serve" {
			ran++
			t.Run("serve", func(t *testing.T) { docsServe(t, md, f, shownUnder(fs, i)) })
			continue
		}
		var names []string
		for _, args := range cmds {
			names = append(names, "bin/skynet "+strings.Join(args, " "))
		}
		ran += len(cmds)
		t.Run(strings.Join(names, "; "), func(t *testing.T) {
			var out, errOut string
			for j, args := range cmds {
				require.NotContains(t, []string{"serve", "bench"}, args[0], "`%s`: serve runs first in its block; bench takes minutes (make bench-cli)", names[j])
				code, o, e := skynetAt(t, args)
				require.Equal(t, exitOK, code, "README command `%s` exited %d:\n%s", names[j], code, e)
				out, errOut = out+o, errOut+e
			}
			checkShown(t, strings.Join(names, "; "), shownUnder(fs, i), out, errOut)
		})
	}
	for _, args := range inlineCommands(md) {
		ran++
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			require.NotContains(t, []string{"serve", "bench"}, args[0], "`bin/skynet %s`: a README command that runs in a test is quick", strings.Join(args, " "))
			args = slices.Clone(args)
			for k, a := range args {
				if a == "DIR" {
					args[k] = t.TempDir()
				}
			}
			code, _, errOut := skynetAt(t, args)
			require.Equal(t, exitOK, code, "README command `bin/skynet %s` exited %d:\n%s", strings.Join(args, " "), code, errOut)
		})
	}
	assert.GreaterOrEqual(t, ran, 4, "the README's quick start and serve commands were not found in ```sh blocks")
}

// docsServe runs the README's serve block: skynet serve on a free port, then
// each curl line against it, their output against the block under it; then
// the Python client's block against the same server, each print against the
// comment beside it.
func docsServe(t *testing.T, md string, f fence, shown []string) {
	skynetBin(t) // before the Chdir: it builds this folder's package
	t.Chdir(repoAbs)
	lines := shellLines(f.body)
	args := strings.Fields(strings.TrimSuffix(lines[0], "&"))
	require.Equal(t, []string{"bin/skynet", "serve"}, args[:2], "the serve block starts with bin/skynet serve")
	require.True(t, strings.HasSuffix(lines[0], "&"), "the serve block runs skynet serve in the background (&): %s", lines[0])
	s := startServe(t, args[2:]...)
	host := strings.TrimPrefix(s.url, "http://")
	at := func(l string) string {
		return strings.NewReplacer("localhost:8765", host, "127.0.0.1:8765", host).Replace(l)
	}

	t.Run("curl", func(t *testing.T) {
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skip("curl is not installed: the README's curl commands were not run (apt-get install curl)")
		}
		var got []string
		for _, l := range lines[1:] {
			require.Contains(t, l, "curl ", "the serve block holds skynet serve and curl commands only: %s", l)
			cmd := exec.Command("timeout", "60", "bash", "-c", at(l))
			out, err := cmd.Output()
			require.NoError(t, err, "README: `%s`:\n%s\n--- skynet serve's stderr:\n%s", l, out, s.stderr())
			for _, o := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				got = append(got, o)
			}
		}
		require.Len(t, got, len(shown), "the lines under the serve block are what its curl commands print: %q", got)
		for k, want := range shown {
			sameReply(t, want, got[k])
		}
	})

	t.Run("python client", func(t *testing.T) {
		var block []string
		for _, g := range fences(section(t, md, "## Serving over HTTP")) {
			if g.lang == "python" && strings.Contains(strings.Join(g.body, "\n"), "skynet_client") {
				block = g.body
			}
		}
		require.NotNil(t, block, "no ```python block of the client under ## Serving over HTTP")
		var want []string
		for _, l := range block {
			if strings.HasPrefix(l, "print(") {
				_, c, ok := strings.Cut(l, "  # ")
				require.True(t, ok, "a print of the client block says what it prints in a comment: %s", l)
				want = append(want, c)
			}
		}
		require.NotEmpty(t, want, "the client block prints nothing")
		script := filepath.Join(t.TempDir(), "client.py")
		require.NoError(t, os.WriteFile(script, []byte(at(strings.Join(block, "\n"))+"\n"), 0o644))
		root := repoAbs
		cmd := exec.Command(classesPython(t), script)
		cmd.Dir = filepath.Dir(script)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "clients", "python"), "PYTHONDONTWRITEBYTECODE=1",
			"SKYNET_TOKEN=", "SKYNET_SERVE_TOKEN=")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the README's client block:\n%s\n--- skynet serve's stderr:\n%s", out, s.stderr())
		assert.Equal(t, want, strings.Split(strings.TrimSpace(string(out)), "\n"), "what the README's client block prints")
	})
}

// sameReply compares a reply line the README shows with one the server
// sent: the same JSON but for the timings ("ms"), or the same text.
func sameReply(t *testing.T, want, got string) {
	t.Helper()
	var w, g any
	if json.Unmarshal([]byte(want), &w) != nil {
		assert.Equal(t, want, got, "the README shows a reply its command does not print")
		return
	}
	require.NoError(t, json.Unmarshal([]byte(got), &g), "the README shows JSON; the server sent %s", got)
	assert.True(t, reflect.DeepEqual(dropMS(w), dropMS(g)), "the README shows\n%s\nthe server sent\n%s", want, got)
}

func dropMS(v any) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "ms")
		for k := range x {
			x[k] = dropMS(x[k])
		}
	case []any:
		for i := range x {
			x[i] = dropMS(x[i])
		}
	}
	return v
}

// makeRecipe is a Makefile target's recipe lines, variables of the README's
// commands expanded.
func makeRecipe(t *testing.T, target string) []string {
	mf := docText(t, "Makefile")
	i := strings.Index(mf, "\n"+target+":")
	require.GreaterOrEqual(t, i, 0, "the Makefile has no target %s", target)
	var out []string
	for _, l := range strings.Split(mf[i+1:], "\n")[1:] {
		if !strings.HasPrefix(l, "\t") {
			break
		}
		l = strings.NewReplacer("./$(BIN)", "bin/skynet", "$(EXAMPLE)", "testdata/exact_match").Replace(strings.TrimSpace(l))
		out = append(out, l)
	}
	return out
}

// TestDocsEveryCommandRuns: each line of the README's ```sh blocks is one a
// test runs: bin/skynet commands and the serve block's curl lines
// (TestDocsCommands), the Go module's commands (TestDocsGoModule), make
// targets that exist (make run: the README's own commands).
func TestDocsEveryCommandRuns(t *testing.T) {
	md := readmeText(t)
	var shown [][]string
	for _, f := range fences(md) {
		if f.lang == "sh" {
			shown = append(shown, commands(f.body)...)
		}
	}
	for _, f := range fences(md) {
		if f.lang != "sh" {
			continue
		}
		body := strings.Join(f.body, "\n")
		serve, gomod := strings.Contains(body, "bin/skynet serve"), strings.Contains(body, "go mod edit -replace")
		for _, l := range shellLines(f.body) {
			args := strings.Fields(l)
			switch {
			case args[0] == "bin/skynet":
			case serve && (args[0] == "curl" || args[0] == "until" && args[1] == "curl"):
			case gomod && (strings.HasPrefix(l, "go mod ") || regexp.MustCompile(`^\$HOME/skynet/build/(static|pyenv)\.sh .*go build `).MatchString(l)):
			case args[0] == "make" && len(args) == 2:
				if args[1] == "run" {
					for _, r := range makeRecipe(t, "run") {
						assert.True(t, slices.ContainsFunc(shown, func(c []string) bool { return "bin/skynet "+strings.Join(c, " ") == r }),
							"make run runs `%s`, which the README's blocks do not show (TestDocsCommands runs what they show)", r)
					}
				}
			default:
				t.Errorf("the README shows `%s`, which no test runs: show it in a block a test runs (TestDocsCommands, TestDocsGoModule), or not as a command", l)
			}
		}
	}
}

// TestDocsExitCodes runs each example of the README's exit-code table.
func TestDocsExitCodes(t *testing.T) {
	rows := tableRows(t, section(t, readmeText(t), "## Commands"), "| code |")
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

// TestDocsRewardExample: the worked example's total (docs/metrics.md) is
// what its command prints for its case, and the result lines shown under
// the command are what it prints.
func TestDocsRewardExample(t *testing.T) {
	md := section(t, docText(t, "docs/metrics.md"), "### Reward: accuracy, speed and cost")
	c := workedCase.FindStringSubmatch(md)
	require.NotNil(t, c, "no worked example naming its case")
	total := workedTotal.FindStringSubmatch(md)
	require.NotNil(t, total, "no **total** in the worked example")
	var cmd, shown []string
	fs := fences(md[strings.Index(md, c[0]):])
	for i, f := range fs {
		if f.lang == "sh" {
			cmd = commands(f.body)[0]
			shown = shownUnder(fs, i)
			break
		}
	}
	require.NotNil(t, cmd, "no command after the worked example")
	require.NotEmpty(t, shown, "no result lines under the worked example's command")
	code, out, errOut := skynetAt(t, cmd)
	require.Equal(t, exitOK, code, errOut)
	name := "bin/skynet " + strings.Join(cmd, " ")
	checkShown(t, name, shown, out, errOut)
	r, ok := parseResults(t, out)[c[1]]
	require.True(t, ok, "`%s` prints no case %s (add it to testdata/reward/cases.jsonl)", name, c[1])
	decimals := len(total[1]) - strings.Index(total[1], ".") - 1
	assert.Equal(t, total[1], strconv.FormatFloat(r.Score, 'f', decimals, 64),
		"the worked example's total is not what `%s` prints for %s", name, c[1])
}

// checkoutPath is how the README's Go example names a file of this
// checkout; pool's example_test.go names it from pool/.
const checkoutPath = `checkout + "/testdata/`

// readmeGoExample is the README's one Go block, a whole program.
func readmeGoExample(t *testing.T) []string {
	t.Helper()
	var examples [][]string
	for _, f := range fences(section(t, readmeText(t), "## Go API")) {
		if f.lang == "go" {
			examples = append(examples, f.body)
		}
	}
	require.Len(t, examples, 1, "one ```go block under ## Go API: a program that builds as pasted")
	return examples[0]
}

// TestDocsGoExample: the README's Go code is a whole program, formatted as
// gofmt does, whose code is pool's Example that go test runs (the metric
// named from this checkout rather than from pool/).
func TestDocsGoExample(t *testing.T) {
	example := readmeGoExample(t)
	src := strings.Join(example, "\n") + "\n"
	formatted, err := format.Source([]byte(src))
	require.NoError(t, err, "the README's Go example does not parse")
	assert.Equal(t, string(formatted), src, "the README's Go example is not as gofmt writes it")
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", src, 0)
	require.NoError(t, err)
	assert.Equal(t, "main", f.Name.Name, "the README's Go example is a program: package main")
	assert.True(t, slices.ContainsFunc(f.Decls, func(d ast.Decl) bool {
		fd, ok := d.(*ast.FuncDecl)
		return ok && fd.Name.Name == "main"
	}), "the README's Go example has a func main")

	b, err := os.ReadFile(repoRoot + "/pool/example_test.go")
	require.NoError(t, err)
	var have []string
	for _, l := range strings.Split(string(b), "\n") {
		have = append(have, strings.TrimSpace(l))
	}
	start := slices.Index(example, "func main() {")
	require.GreaterOrEqual(t, start, 0, "no func main() { line")
	n := 0
	for _, l := range example[start+1:] {
		l = strings.TrimSpace(l)
		if l == "" || l == "}" || strings.HasPrefix(l, "checkout := ") {
			continue
		}
		n++
		assert.Contains(t, have, strings.ReplaceAll(l, checkoutPath, `"../testdata/`),
			"the README's Go example has a line pool/example_test.go does not: keep them the same")
	}
	assert.Greater(t, n, 5, "the README's Go example scores nothing")
}

var (
	goLine     = regexp.MustCompile(`(?m)^go (\S+)$`)
	goMention  = regexp.MustCompile(`\bGo (1\.[0-9]+(\.[0-9]+)?)\b`)
	makeTarget = regexp.MustCompile("(?m)(?:`|^)make ([a-z][a-z-]*)")
	mfTarget   = regexp.MustCompile(`(?m)^([a-z][a-z-]*):`)
	mdLink     = regexp.MustCompile(`\]\(([^)\s]*)\)`)
)

// slug is the anchor GitHub gives a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the anchors of a markdown file's headings (code blocks left
// out; a repeated one numbered as GitHub does).
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimLeft(l, "#")
		if !strings.HasPrefix(h, " ") {
			continue
		}
		s := slug(h)
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// checkLinks: every relative link of a markdown file leads to a file, and
// an #anchor to a heading of the markdown file it names.
func checkLinks(t *testing.T, path string) {
	md := docText(t, path)
	for _, m := range mdLink.FindAllStringSubmatch(md, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		full := filepath.Join(repoRoot, filepath.Dir(path), file)
		if file == "" {
			full = filepath.Join(repoRoot, path)
		}
		_, err := os.Stat(full)
		if !assert.NoError(t, err, "%s links to %s", path, target) || anchor == "" || !strings.HasSuffix(full, ".md") {
			continue
		}
		b, err := os.ReadFile(full)
		require.NoError(t, err)
		assert.True(t, anchors(string(b))[anchor], "%s links to %s: %s has no heading #%s", path, target, file, anchor)
	}
}

// TestDocsGoVersionTargetsLinks: the Go version is go.mod's; every make
// target named exists; every relative link, of the README and of docs/,
// leads to a file, and an anchor to a heading.
func TestDocsGoVersionTargetsLinks(t *testing.T) {
	md := readmeText(t)
	mod, err := os.ReadFile(repoRoot + "/go.mod")
	require.NoError(t, err)
	m := goLine.FindSubmatch(mod)
	require.NotNil(t, m, "go.mod has no go line")
	version := string(m[1])
	assert.True(t, strings.Contains(section(t, md, "## Quick start"), "Go "+version),
		"the quick start must name go.mod's Go version, Go %s", version)
	for _, g := range goMention.FindAllStringSubmatch(md, -1) {
		assert.Equal(t, version, g[1], "the README names Go %s; go.mod says %s", g[1], version)
	}

	mf, err := os.ReadFile(repoRoot + "/Makefile")
	require.NoError(t, err)
	var targets []string
	for _, m := range mfTarget.FindAllSubmatch(mf, -1) {
		targets = append(targets, string(m[1]))
	}
	docs, err := filepath.Glob(repoRoot + "/docs/*.md")
	require.NoError(t, err)
	paths := []string{"README.md"}
	for _, d := range docs {
		paths = append(paths, "docs/"+filepath.Base(d))
	}
	for _, p := range paths {
		text := docText(t, p)
		for _, m := range makeTarget.FindAllStringSubmatch(text, -1) {
			assert.True(t, slices.Contains(targets, m[1]), "%s names `make %s`; the Makefile has no such target", p, m[1])
		}
		if p != "README.md" {
			for _, g := range goMention.FindAllStringSubmatch(text, -1) {
				assert.True(t, strings.HasPrefix(version+".", g[1]+"."), "%s names Go %s; go.mod says %s", p, g[1], version)
			}
		}
		checkLinks(t, p)
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

// TestDocsGoModule follows the README's Go API section: its program, pasted
// as it is into a new module (the checkout's path put where it says), is
// pointed at this checkout and built by the README's commands, and prints
// what it says it prints. A pool's workers are that program started again.
func TestDocsGoModule(t *testing.T) {
	if raceEnabled {
		t.Skip("builds and runs a program; the run without -race covers it")
	}
	example := readmeGoExample(t)
	var build []string
	goAPI, err := os.ReadFile(filepath.Join(repoRoot, "docs", "go-api.md"))
	require.NoError(t, err)
	for _, f := range fences(section(t, string(goAPI), "## In your own module")) {
		if f.lang == "sh" && strings.Contains(strings.Join(f.body, "\n"), "go mod edit -replace") {
			build = f.body
		}
	}
	require.NotNil(t, build, "no ```sh block with go mod edit -replace under docs/go-api.md's ## In your own module, which the README points to")
	require.Contains(t, section(t, readmeText(t), "## Go API"), "docs/go-api.md#in-your-own-module", "the README points to the build commands")
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	want := ""
	for _, l := range example {
		if w, ok := strings.CutPrefix(strings.TrimSpace(l), "// Output: "); ok {
			want = w
		}
	}
	require.NotEmpty(t, want, "the Go example has no // Output: line")
	src := strings.Join(example, "\n") + "\n"
	require.Contains(t, src, "$HOME/skynet", "the Go example names this checkout as the build commands do, $HOME/skynet")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(strings.ReplaceAll(src, "$HOME/skynet", root)), 0o644))
	sh := func(line string) (string, error) {
		cmd := exec.Command("bash", "-c", line)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	require.True(t, slices.ContainsFunc(build, func(l string) bool { return strings.HasPrefix(l, "go mod init ") }),
		"the README's commands start no module (go mod init)")
	built := 0
	for _, line := range shellLines(build) {
		line = strings.ReplaceAll(line, "$HOME/skynet", root)
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
	assert.Regexp(t, "`make test` takes about [0-9]+ minutes", section(t, md, "## Quick start"))
	goAPI := section(t, md, "## Go API")
	assert.Contains(t, goAPI, "`ScoreAll(ctx, cases, window)`")
	assert.Regexp(t, "`window` is how many cases\\s+may be in flight at once", goAPI)
}

// TestDocsReadmeShape: issue 47, a README to read top to bottom: at most
// readmeMaxLines lines, its sections in order; the rest is in docs/.
func TestDocsReadmeShape(t *testing.T) {
	md := readmeText(t)
	lines := strings.Count(md, "\n")
	if !strings.HasSuffix(md, "\n") {
		lines++
	}
	assert.LessOrEqual(t, lines, readmeMaxLines, "README.md has %d lines; keep it a guide of at most %d and move the rest to docs/", lines, readmeMaxLines)
	var got []string
	inFence := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if h, ok := strings.CutPrefix(l, "## "); ok && !inFence {
			got = append(got, h)
		}
	}
	assert.Equal(t, readmeSections, got, "the README's sections, in the order a newcomer reads them")
}

var (
	placeholder = regexp.MustCompile(`\b(?:JSONL|JSON|UTF|CSV)\b|CPython [A-Z0-9][0-9.]*|\b[A-Z][A-Z_]*\b|\b0x[0-9A-FN]+\b|\b[0-9][0-9.]*\b`)
	kept        = map[string]bool{"JSONL": true, "JSON": true, "UTF": true, "CSV": true}
)

// TestDocsTroubleshooting: what the troubleshooting table says you see is
// what the code prints: each quoted message, cut at its placeholders
// (PATH, N, 0xNN, CPython 3.11.2), is in pieces of the code's own strings.
func TestDocsTroubleshooting(t *testing.T) {
	var code strings.Builder
	require.NoError(t, filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "docs" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, ".c")) {
			b, err := os.ReadFile(p)
			code.Write(b)
			return err
		}
		return nil
	}))
	src := code.String()
	checked := 0
	for _, r := range tableRows(t, section(t, readmeText(t), "## Troubleshooting"), "| you see |") {
		require.Len(t, r, 2, "troubleshooting row %q", r)
		for _, m := range codeSpan.FindAllStringSubmatch(r[0], -1) {
			last := 0
			pieces := []string{}
			for _, at := range placeholder.FindAllStringIndex(m[1], -1) {
				if kept[m[1][at[0]:at[1]]] {
					continue
				}
				pieces = append(pieces, m[1][last:at[0]])
				last = at[1]
			}
			pieces = append(pieces, m[1][last:])
			for _, p := range pieces {
				p = strings.TrimSpace(p)
				if len(strings.Fields(p)) < 2 || len(p) < 8 {
					continue
				}
				checked++
				assert.Contains(t, src, p, "the troubleshooting table quotes `%s`; the code prints no %q", m[1], p)
			}
		}
	}
	assert.Greater(t, checked, 8, "the troubleshooting table quotes few messages")
}

// TestDocsDependencies: the developers' guide asks the README to name each
// dependency and why, and why not github.com/go-python/cpy3.
func TestDocsDependencies(t *testing.T) {
	deps := section(t, readmeText(t), "## Dependencies")
	mod := docText(t, "go.mod")
	n := 0
	for _, l := range strings.Split(mod, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && strings.Contains(f[0], ".") && !strings.Contains(l, "// indirect") && f[0] != "module" {
			n++
			path := f[0]
			if path == "golang.org/x/time" {
				path = "golang.org/x/time/rate" // the package used
			}
			assert.Contains(t, deps, "`"+path+"`", "the README's dependencies do not name %s, which go.mod requires", f[0])
		}
	}
	assert.NotZero(t, n, "no require in go.mod")
	assert.Contains(t, deps, "Why not `github.com/go-python/cpy3`")
	assert.Contains(t, deps, "`libpython", "the README names the C dependency too")
}
