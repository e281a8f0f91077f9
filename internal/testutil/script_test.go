package testutil

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeScript(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseScript(t *testing.T) {
	path := writeScript(t, "# first\nadd 1\n----\nok\n\n\n# second\nshow\n----\na\nb\n# trailing\n")
	blocks, trailer, err := ParseScript(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []ScriptBlock{
		{Line: 2, Before: []string{"# first"}, Cmd: "add 1", Want: []string{"ok"}},
		{Line: 8, Before: []string{"", "# second"}, Cmd: "show", Want: []string{"a", "b", "# trailing"}},
	}
	if !reflect.DeepEqual(blocks, want) || trailer != nil {
		t.Fatalf("parsed %+v, trailer %q; want %+v and no trailer", blocks, trailer, want)
	}
}

func TestParseScriptErrors(t *testing.T) {
	for _, text := range []string{"cmd\nnot a separator\n", "cmd\n"} {
		if _, _, err := ParseScript(writeScript(t, text)); err == nil || !strings.Contains(err.Error(), "cmd") {
			t.Errorf("ParseScript(%q) = %v; want an error naming the command", text, err)
		}
	}
}

func TestRunScriptRewrite(t *testing.T) {
	path := writeScript(t, "# c\necho x\n----\nstale\n\n# end\n")
	RunScript(t, path, true, func(cmd string) []string { return []string{strings.TrimPrefix(cmd, "echo ")} })
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# c\necho x\n----\nx\n\n# end\n"; string(got) != want {
		t.Fatalf("rewritten script %q; want %q", got, want)
	}
}
