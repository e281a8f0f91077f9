package sasl

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Login module classes whose options this package reads, as written in sasl.jaas.config.
const (
	PlainLoginModule       = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule       = "org.apache.kafka.common.security.scram.ScramLoginModule"
	OAuthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// ControlFlag is a JAAS login module's control flag. The broker does not run login modules, so it
// is kept for completeness and validated, as Kafka validates it, but has no effect.
type ControlFlag int

// The four JAAS control flags.
const (
	FlagRequired ControlFlag = iota + 1
	FlagRequisite
	FlagSufficient
	FlagOptional
)

// String returns the flag as written in a JAAS configuration.
func (f ControlFlag) String() string {
	switch f {
	case FlagRequired:
		return "required"
	case FlagRequisite:
		return "requisite"
	case FlagSufficient:
		return "sufficient"
	case FlagOptional:
		return "optional"
	}
	return fmt.Sprintf("ControlFlag(%d)", int(f))
}

// LoginModule is one entry of a JAAS configuration: `Class Flag key=value ...;`.
type LoginModule struct {
	// Class is the login module's class name, e.g. PlainLoginModule.
	Class string
	// Flag is the control flag.
	Flag ControlFlag
	// Options are the key=value options; a key given twice keeps its last value, as in Kafka.
	Options map[string]string
}

// ParseJAAS parses a sasl.jaas.config value (also listener.name.<l>.<mech>.sasl.jaas.config):
// one or more `<class> <flag> (<key>=<value>)*;` entries. It reads the value as Kafka's JaasConfig
// does with java.io.StreamTokenizer: bytes up to space are blanks; '/' starts a comment ("//",
// "/* */", or '/' followed by anything, to the end of the line); values are words or strings in
// double or single quotes with Java escapes (\n, \t, \", \\, octal \123, ...); a string ends
// unterminated at a line end or the end of the value. The errors are Kafka's.
func ParseJAAS(config string) ([]LoginModule, error) {
	lx := jaasLexer{src: config}
	var mods []LoginModule
	for {
		t := lx.next()
		if t.kind == jaasEOF {
			break
		}
		m, err := parseJAASEntry(&lx, t)
		if err != nil {
			return nil, err
		}
		mods = append(mods, m)
	}
	if len(mods) == 0 {
		return nil, errors.New("Login module not specified in JAAS config")
	}
	return mods, nil
}

// ParseJAASModule parses a sasl.jaas.config value that must hold exactly one login module, as
// Kafka requires of the property for a listener and mechanism.
func ParseJAASModule(config string) (LoginModule, error) {
	mods, err := ParseJAAS(config)
	if err != nil {
		return LoginModule{}, err
	}
	if len(mods) != 1 {
		return LoginModule{}, fmt.Errorf("JAAS config property contains %d login modules, should be 1 module", len(mods))
	}
	return mods[0], nil
}

// parseJAASEntry parses one entry whose first token is first, through its ';'.
func parseJAASEntry(lx *jaasLexer, first jaasToken) (LoginModule, error) {
	class, classOK := first.value()
	t := lx.next()
	if t.kind == jaasEOF {
		return LoginModule{}, errors.New("Login module control flag not specified in JAAS config")
	}
	flagText, ok := t.value()
	if !ok {
		return LoginModule{}, errors.New("Login module control flag is not available in the JAAS config")
	}
	flag, err := parseControlFlag(flagText)
	if err != nil {
		return LoginModule{}, err
	}
	opts := make(map[string]string)
	for {
		t = lx.next()
		if t.kind == jaasEOF || t.isChar(';') {
			break
		}
		key, keyOK := t.value()
		if !keyOK {
			key = "null" // what Java prints for the missing key
		}
		if !lx.next().isChar('=') {
			return LoginModule{}, fmt.Errorf("Value not specified for key '%s' in JAAS config", key)
		}
		v, ok := lx.next().value()
		if !ok || !keyOK {
			return LoginModule{}, fmt.Errorf("Value not specified for key '%s' in JAAS config", key)
		}
		opts[key] = v
	}
	if !t.isChar(';') {
		return LoginModule{}, errors.New("JAAS config entry not terminated by semi-colon")
	}
	if !classOK || class == "" {
		return LoginModule{}, fmt.Errorf("login module class name missing in JAAS config entry before %q", flagText)
	}
	return LoginModule{Class: class, Flag: flag, Options: opts}, nil
}

// parseControlFlag parses a control flag in any case, as Kafka does.
func parseControlFlag(s string) (ControlFlag, error) {
	switch strings.ToUpper(s) {
	case "REQUIRED":
		return FlagRequired, nil
	case "REQUISITE":
		return FlagRequisite, nil
	case "SUFFICIENT":
		return FlagSufficient, nil
	case "OPTIONAL":
		return FlagOptional, nil
	}
	return 0, fmt.Errorf("Invalid login module control flag '%s' in JAAS config", s)
}

// jaasKind is the kind of a JAAS token.
type jaasKind int

const (
	jaasEOF      jaasKind = iota
	jaasWord              // a run of word characters
	jaasQuoted            // a quoted string, quotes removed and escapes applied
	jaasOrdinary          // a single ordinary character: ';', '=', or U+0081..U+009F
)

// jaasToken is one token: text for words and strings, char for ordinary characters.
type jaasToken struct {
	kind jaasKind
	text string
	char rune
}

// value returns the token's text, and false for tokens that have none (StreamTokenizer's null
// sval): ordinary characters and the end.
func (t jaasToken) value() (string, bool) {
	return t.text, t.kind == jaasWord || t.kind == jaasQuoted
}

// isChar reports whether t is the ordinary character c.
func (t jaasToken) isChar(c rune) bool { return t.kind == jaasOrdinary && t.char == c }

// jaasClass is StreamTokenizer's character class under JaasConfig's syntax table.
type jaasClass int

const (
	classBlank jaasClass = iota
	classWord
	classQuote
	classComment
	classOrdinary
)

// classOf returns the class of r: blanks 0..32; quotes " and '; the comment character /; ';' and
// '=' ordinary; 33..128 and 160.. word characters; 129..159 ordinary (StreamTokenizer's reset
// syntax, left as is by JaasConfig).
func classOf(r rune) jaasClass {
	switch {
	case r <= ' ':
		return classBlank
	case r == '"' || r == '\'':
		return classQuote
	case r == '/':
		return classComment
	case r == ';' || r == '=':
		return classOrdinary
	case r <= 128 || r >= 160:
		return classWord
	}
	return classOrdinary
}

// jaasLexer splits a JAAS configuration into tokens. Invalid UTF-8 reads as U+FFFD, a word
// character.
type jaasLexer struct {
	src string
	pos int
}

// peek returns the next rune without consuming it, and false at the end.
func (lx *jaasLexer) peek() (rune, int, bool) {
	if lx.pos >= len(lx.src) {
		return 0, 0, false
	}
	r, n := utf8.DecodeRuneInString(lx.src[lx.pos:])
	return r, n, true
}

// read consumes and returns the next rune, and false at the end.
func (lx *jaasLexer) read() (rune, bool) {
	r, n, ok := lx.peek()
	lx.pos += n
	return r, ok
}

// skipLine consumes runes up to, not including, the next line end.
func (lx *jaasLexer) skipLine() {
	for {
		r, n, ok := lx.peek()
		if !ok || r == '\n' || r == '\r' {
			return
		}
		lx.pos += n
	}
}

// next returns the next token.
func (lx *jaasLexer) next() jaasToken {
	for {
		start := lx.pos
		c, ok := lx.read()
		if !ok {
			return jaasToken{kind: jaasEOF}
		}
		switch classOf(c) {
		case classBlank:
			continue
		case classWord:
			for {
				r, n, ok := lx.peek()
				if !ok || classOf(r) != classWord {
					break
				}
				lx.pos += n
			}
			return jaasToken{kind: jaasWord, text: strings.ToValidUTF8(lx.src[start:lx.pos], "\uFFFD")}
		case classQuote:
			return jaasToken{kind: jaasQuoted, text: lx.quoted(c)}
		case classComment:
			c2, ok := lx.read()
			switch {
			case ok && c2 == '*':
				end := strings.Index(lx.src[lx.pos:], "*/")
				if end < 0 {
					lx.pos = len(lx.src)
					return jaasToken{kind: jaasEOF}
				}
				lx.pos += end + 2
			case ok && c2 == '/':
				lx.skipLine()
			case ok:
				// A lone '/' comments out the rest of the line after the character that follows
				// it, even when that character is itself a line end, as in StreamTokenizer.
				lx.skipLine()
			}
			continue
		default:
			return jaasToken{kind: jaasOrdinary, char: c}
		}
	}
}

// quoted reads a string opened by quote q, through its closing quote, which it consumes; a line end
// or the end of the input also ends it, unconsumed.
func (lx *jaasLexer) quoted(q rune) string {
	var b strings.Builder
	for {
		r, n, ok := lx.peek()
		if !ok || r == '\n' || r == '\r' {
			return b.String()
		}
		lx.pos += n
		if r == q {
			return b.String()
		}
		if r != '\\' {
			b.WriteRune(r)
			continue
		}
		e, ok := lx.read()
		if !ok {
			b.WriteRune('\uFFFF') // StreamTokenizer stores the end of input, -1, as a char
			return b.String()
		}
		b.WriteRune(lx.escape(e))
	}
}

// escape returns the character a backslash followed by e stands for, consuming the rest of an
// octal escape: up to three octal digits, the first at most 3 when there are three.
func (lx *jaasLexer) escape(e rune) rune {
	if e >= '0' && e <= '7' {
		v := e - '0'
		if d, n, ok := lx.peek(); ok && d >= '0' && d <= '7' {
			lx.pos += n
			v = v<<3 + d - '0'
			if d2, n2, ok := lx.peek(); ok && d2 >= '0' && d2 <= '7' && e <= '3' {
				lx.pos += n2
				v = v<<3 + d2 - '0'
			}
		}
		return v
	}
	switch e {
	case 'a':
		return 0x7
	case 'b':
		return '\b'
	case 'f':
		return 0xC
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'v':
		return 0xB
	}
	return e
}
