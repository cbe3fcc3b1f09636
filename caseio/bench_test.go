package caseio

import (
	"bufio"
	"os"
	"testing"
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
