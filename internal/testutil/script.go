package testutil

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// ScriptBlock is one command of a scenario script with what the script says about it.
type ScriptBlock struct {
	// Line is the line number of the command.
	Line int
	// Before holds the comment and blank lines before the command, which a rewrite keeps.
	Before []string
	// Cmd is the command line.
	Cmd string
	// Want is the expected output, one string a line.
	Want []string
}

// ParseScript reads a scenario script in the style of etcd raft's interaction tests: blocks of a
// command line, a "----" line and the expected output up to a blank line. Lines starting with #
// and blank lines between blocks are comments. trailer is what follows the last block.
func ParseScript(path string) (blocks []ScriptBlock, trailer []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open script: %w", err)
	}
	defer f.Close()
	var cur ScriptBlock
	const (
		beforeCmd = iota
		afterCmd
		inOutput
	)
	state := beforeCmd
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch state {
		case beforeCmd:
			if line == "" || strings.HasPrefix(line, "#") {
				cur.Before = append(cur.Before, line)
				continue
			}
			cur.Cmd, cur.Line, state = line, n, afterCmd
		case afterCmd:
			if line != "----" {
				return nil, nil, fmt.Errorf("%s:%d: want ---- after command %q, got %q", path, n, cur.Cmd, line)
			}
			state = inOutput
		case inOutput:
			if line == "" {
				blocks = append(blocks, cur)
				cur, state = ScriptBlock{}, beforeCmd
				continue
			}
			cur.Want = append(cur.Want, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	switch state {
	case inOutput:
		return append(blocks, cur), nil, nil
	case afterCmd:
		return nil, nil, fmt.Errorf("%s:%d: command %q has no ----", path, cur.Line, cur.Cmd)
	}
	return blocks, cur.Before, nil
}

// RunScript runs the scenario script at path: each command goes to run, which returns the
// output lines it caused, and any difference from the expected output fails t. With rewrite
// the script is written back with the actual output instead, to be reviewed in the diff (the
// -rewrite flag of the raft and coord tests).
func RunScript(t *testing.T, path string, rewrite bool, run func(cmd string) []string) {
	t.Helper()
	blocks, trailer, err := ParseScript(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, b := range blocks {
		got := run(b.Cmd)
		if !rewrite && !slices.Equal(got, b.Want) {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, b.Line, b.Cmd, strings.Join(got, "\n"), strings.Join(b.Want, "\n"))
		}
		for _, l := range b.Before {
			out.WriteString(l + "\n")
		}
		out.WriteString(b.Cmd + "\n----\n")
		for _, l := range got {
			out.WriteString(l + "\n")
		}
		out.WriteString("\n")
	}
	if !rewrite {
		return
	}
	for _, l := range trailer {
		out.WriteString(l + "\n")
	}
	if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
