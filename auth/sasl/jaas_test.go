package sasl

import (
	"reflect"
	"testing"
)

func TestParseJAAS(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		wMods []LoginModule
	}{
		{
			name: "task example",
			in:   `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
			wMods: []LoginModule{{PlainLoginModule, FlagRequired, map[string]string{
				"username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret"}}},
		},
		{
			name:  "no options, flag in any case",
			in:    "a.B ReQuIsItE;",
			wMods: []LoginModule{{"a.B", FlagRequisite, map[string]string{}}},
		},
		{
			name: "two modules over lines",
			in:   "A sufficient\n\tk=v;\r\nB optional x = 'y z' ;",
			wMods: []LoginModule{
				{"A", FlagSufficient, map[string]string{"k": "v"}},
				{"B", FlagOptional, map[string]string{"x": "y z"}},
			},
		},
		{
			name:  "escapes",
			in:    `M required a="q\"uote" b="back\\slash" c="tab\tnl\n" d="\101\0619\4012" e='it\'s' f="\x";`,
			wMods: []LoginModule{{"M", FlagRequired, map[string]string{"a": `q"uote`, "b": `back\slash`, "c": "tab\tnl\n", "d": "A19 12", "e": "it's", "f": "x"}}},
		},
		{
			name:  "unquoted words keep backslashes",
			in:    `M required a=x\y;`,
			wMods: []LoginModule{{"M", FlagRequired, map[string]string{"a": `x\y`}}},
		},
		{
			name:  "unquoted words stop at quotes",
			in:    `M required b=p"q";`,
			wMods: nil, // b=p, then the string "q" where a key is expected, followed by ';': an error
		},
		{
			name:  "comments",
			in:    "// leading\nM /* inline */ required a=1 // trailing\n b=2 /* multi\nline */ c=3;",
			wMods: []LoginModule{{"M", FlagRequired, map[string]string{"a": "1", "b": "2", "c": "3"}}},
		},
		{
			name:  "a lone slash comments out the line",
			in:    "M required a=x/y b=2\n c=3;",
			wMods: []LoginModule{{"M", FlagRequired, map[string]string{"a": "x", "c": "3"}}},
		},
		{
			name:  "a string ends unterminated at a line end",
			in:    "M required a=\"open\n b=2;",
			wMods: []LoginModule{{"M", FlagRequired, map[string]string{"a": "open", "b": "2"}}},
		},
		{
			name:  "last value of a key wins, empty values kept",
			in:    `M required k=1 k="2" e="";`,
			wMods: []LoginModule{{"M", FlagRequired, map[string]string{"k": "2", "e": ""}}},
		},
		{
			name:  "non-ASCII word characters",
			in:    "M required user_jürgen=pässwörd;",
			wMods: []LoginModule{{"M", FlagRequired, map[string]string{"user_jürgen": "pässwörd"}}},
		},
		{
			name:  "quoted class name",
			in:    `"my module" required;`,
			wMods: []LoginModule{{"my module", FlagRequired, map[string]string{}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mods, err := ParseJAAS(tc.in)
			if tc.wMods == nil {
				if err == nil {
					t.Fatalf("ParseJAAS = %+v, want an error", mods)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(mods, tc.wMods) {
				t.Fatalf("ParseJAAS =\n%+v\nwant\n%+v", mods, tc.wMods)
			}
		})
	}
}

func TestParseJAASErrors(t *testing.T) {
	for _, tc := range []struct {
		in, wErr string
	}{
		{"", "Login module not specified in JAAS config"},
		{"  // only a comment", "Login module not specified in JAAS config"},
		{"M", "Login module control flag not specified in JAAS config"},
		{"M ;", "Login module control flag is not available in the JAAS config"},
		{"M mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"},
		{"M required a;", "Value not specified for key 'a' in JAAS config"},
		{"M required a=;", "Value not specified for key 'a' in JAAS config"},
		{"M required a=", "Value not specified for key 'a' in JAAS config"},
		{"M required =b;", "Value not specified for key 'null' in JAAS config"},
		{"M required a=b", "JAAS config entry not terminated by semi-colon"},
		{"M required a=b /* unterminated ;", "JAAS config entry not terminated by semi-colon"},
		{"; required;", `login module class name missing in JAAS config entry before "required"`},
		{"M required\u0085;", "Value not specified for key 'null' in JAAS config"}, // U+0085 is an ordinary character
	} {
		mods, err := ParseJAAS(tc.in)
		if err == nil || err.Error() != tc.wErr {
			t.Errorf("ParseJAAS(%q) = %+v, %v; want error %q", tc.in, mods, err, tc.wErr)
		}
	}
}

func TestParseJAASModule(t *testing.T) {
	m, err := ParseJAASModule("M required a=b;")
	if err != nil || m.Class != "M" || m.Options["a"] != "b" {
		t.Fatalf("ParseJAASModule = %+v, %v", m, err)
	}
	_, err = ParseJAASModule("A required; B required;")
	if err == nil || err.Error() != "JAAS config property contains 2 login modules, should be 1 module" {
		t.Fatalf("two modules: %v", err)
	}
}

func TestControlFlagString(t *testing.T) {
	for f, w := range map[ControlFlag]string{FlagRequired: "required", FlagRequisite: "requisite",
		FlagSufficient: "sufficient", FlagOptional: "optional", 0: "ControlFlag(0)"} {
		if f.String() != w {
			t.Errorf("%d.String() = %q, want %q", int(f), f.String(), w)
		}
	}
}
