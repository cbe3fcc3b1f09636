// Package caseio reads and writes the files a run works on: case files
// (JSONL, one case a line: ParseCase, Reader, QuickID), datasets (JSONL or
// CSV rows with named input and output columns: Dataset) and results lines
// (AppendResult writes one, ParseResult reads one back, for merging and
// resuming runs). Cases come out as engine.Case, results go in as
// engine.Result; nothing here runs Python.
//
//	cr := caseio.NewReader(f)
//	for {
//		c, err := cr.Next() // a *LineError names a bad line; reading goes on
//		if err == io.EOF {
//			break
//		}
//		...
//	}
package caseio
