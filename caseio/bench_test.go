package caseio

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/skynetml/skynet/cpython"
)

// BenchmarkParseCase parses the lines of a case file like the cheap
// graders' (testdata/cheap), as a worker does for each case it scores.
func BenchmarkParseCase(b *testing.B) {
	f, err := os.Open("../testdata/exact_match/cases.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	lines = append(lines, []byte(`{"id": "c7", "input": {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?"}, "output": "First we multiply 12 by 4. the model score of answer \"quoted\" reason. The answer is 72.\n#### 72", "expected": {"answer": "72", "answers": ["72", "seventy-two"]}}`))
	b.ResetTimer()
	for i := range b.N {
		l := lines[i%len(lines)]
		if _, err := ParseCase(l, i+1); err != nil {
			b.Fatal(err)
		}
	}
}

// gsm8kLines are case lines shaped as the cheap graders' (testdata/cheap):
// a question, a model's answer with a newline escape, a reference.
func gsm8kLines(n int) [][]byte {
	words := strings.Fields("the model score of answer reason metric engine python value result case with a few more words")
	lines := make([][]byte, n)
	for i := range lines {
		a, b := 100+i*37%900, 10+i*13%990
		var text strings.Builder
		for k := range 12 + i%20 {
			text.WriteString(words[(i+k*7)%len(words)] + " ")
		}
		lines[i] = fmt.Appendf(nil, `{"expected": {"answer": "%d"}, "id": "c%d", "input": {"question": "What is %d times %d?"}, "output": "First we multiply %d by %d. %sThe answer is %d.\n#### %d"}`,
			a*b, i, a, b, a, b, text.String(), a*b, a*b)
	}
	return lines
}

// BenchmarkTranscoder: a worker's read of a case line, parsed and then its
// values transcoded (the engine's way for ParseCase's Cases), against a
// Transcoder's one pass.
func BenchmarkTranscoder(b *testing.B) {
	lines := gsm8kLines(1024)
	b.Run("ParseCase+AppendJSON", func(b *testing.B) {
		var out []byte
		for i := 0; b.Loop(); i++ {
			c, err := ParseCase(lines[i%len(lines)], i+1)
			if err != nil {
				b.Fatal(err)
			}
			out = out[:0]
			for _, v := range []any{c.Input, c.Output, c.Expected} {
				if out, err = cpython.AppendJSON(out, v.(json.RawMessage)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("Transcoder", func(b *testing.B) {
		var t Transcoder
		for i := 0; b.Loop(); i++ {
			if _, err := t.ParseCase(lines[i%len(lines)], i+1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkQuickID: the parent's look at each case line, for its id.
func BenchmarkQuickID(b *testing.B) {
	lines := gsm8kLines(1024)
	for i := 0; b.Loop(); i++ {
		if _, ok := QuickID(lines[i%len(lines)], i+1); !ok {
			b.Fatal("no id")
		}
	}
}
