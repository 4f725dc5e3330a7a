package model

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Amount is a threshold given either as a token count or as a fraction of
// the model's context window. The zero Amount is unset (IsZero) and
// resolves to 0.
//
// In YAML (and JSON, via text) it is written as a token count (100000,
// "100000", "100k", "1.5M", "100_000") or as a fraction ("40%", 0.4). A
// bare number is a token count if it is an integer and a fraction if it is
// in (0, 1) with a fractional part; 1.0 and 1 are ambiguous and read as a
// token count only when written as the integer 1, so write "100%" for the
// whole window.
type Amount struct {
	tokens   int
	fraction float64 // in (0, 1]; 0 when tokens is used
}

// Tokens returns an Amount of n tokens. n must not be negative.
func Tokens(n int) Amount { return Amount{tokens: n} }

// Fraction returns an Amount of f times the window; f must be in (0, 1].
func Fraction(f float64) Amount { return Amount{fraction: f} }

// IsZero reports whether a is unset.
func (a Amount) IsZero() bool { return a.tokens == 0 && a.fraction == 0 }

// IsFraction reports whether a is relative to the window.
func (a Amount) IsFraction() bool { return a.fraction != 0 }

// TokenCount returns the token count of an absolute Amount (0 otherwise).
func (a Amount) TokenCount() int { return a.tokens }

// FractionOf returns the fraction of a relative Amount (0 otherwise).
func (a Amount) FractionOf() float64 { return a.fraction }

// Resolve returns the Amount in tokens for a model with the given window:
// a fraction is multiplied by the window and rounded down; a token count
// is returned as given, even when it exceeds the window.
func (a Amount) Resolve(window int) int {
	if a.fraction != 0 {
		return int(math.Floor(a.fraction*float64(window) + 1e-9))
	}
	return a.tokens
}

// Validate reports an Amount that cannot come from parsing (negative, or
// a fraction outside (0, 1]).
func (a Amount) Validate() error {
	switch {
	case a.tokens < 0:
		return fmt.Errorf("amount: negative token count %d", a.tokens)
	case a.fraction < 0 || a.fraction > 1 || math.IsNaN(a.fraction):
		return fmt.Errorf("amount: fraction %v outside (0, 1]", a.fraction)
	case a.tokens != 0 && a.fraction != 0:
		return errors.New("amount: both tokens and fraction set")
	}
	return nil
}

// String formats a the way ParseAmount reads it: "40%" or "100000".
func (a Amount) String() string {
	if a.fraction != 0 {
		return strconv.FormatFloat(a.fraction*100, 'f', -1, 64) + "%"
	}
	return strconv.Itoa(a.tokens)
}

// ParseAmount parses "100000", "100_000", "100k", "1.5M", "40%" or "0.4".
func ParseAmount(s string) (Amount, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Amount{}, fmt.Errorf("amount: empty")
	}
	if p, ok := strings.CutSuffix(t, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(f) || f <= 0 || f > 100 {
			return Amount{}, fmt.Errorf("amount: %q is not a percentage in (0, 100]", s)
		}
		return Amount{fraction: f / 100}, nil
	}
	mult := 1.0
	switch t[len(t)-1] {
	case 'k', 'K':
		mult, t = 1e3, t[:len(t)-1]
	case 'm', 'M':
		mult, t = 1e6, t[:len(t)-1]
	}
	t = strings.ReplaceAll(strings.TrimSpace(t), "_", "")
	if mult == 1 {
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return tokenAmount(float64(n), s)
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return Amount{}, fmt.Errorf("amount: cannot parse %q (want 100000, \"100k\" or \"40%%\")", s)
	}
	if mult == 1 && f > 0 && f < 1 {
		return Amount{fraction: f}, nil
	}
	return tokenAmount(f*mult, s)
}

func tokenAmount(f float64, s string) (Amount, error) {
	if f < 0 || f != math.Trunc(f) || f > maxReasonableLimit {
		return Amount{}, fmt.Errorf("amount: %q is not a whole, non-negative token count up to %d", s, maxReasonableLimit)
	}
	return Amount{tokens: int(f)}, nil
}

// UnmarshalYAML reads an Amount from a YAML scalar.
func (a *Amount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: amount must be a number or a string like \"100k\" or \"40%%\"", n.Line)
	}
	if n.Tag == "!!null" {
		*a = Amount{}
		return nil
	}
	v, err := ParseAmount(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*a = v
	return nil
}

// MarshalYAML writes a token count as an integer and a fraction as "40%".
func (a Amount) MarshalYAML() (any, error) {
	if a.fraction != 0 {
		return a.String(), nil
	}
	return a.tokens, nil
}

// UnmarshalText reads an Amount from text (JSON strings, flags, env).
func (a *Amount) UnmarshalText(b []byte) error {
	v, err := ParseAmount(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// MarshalText writes a as String does.
func (a Amount) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalJSON accepts a JSON number (a token count, or a fraction in
// (0, 1)) or a string as ParseAmount reads it.
func (a *Amount) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		*a = Amount{}
		return nil
	}
	if len(s) >= 2 && s[0] == '"' {
		u, err := strconv.Unquote(s)
		if err != nil {
			return fmt.Errorf("amount: %w", err)
		}
		s = u
	}
	return a.UnmarshalText([]byte(s))
}

// MarshalJSON writes a token count as a number and a fraction as "40%".
func (a Amount) MarshalJSON() ([]byte, error) {
	if a.fraction != 0 {
		return []byte(strconv.Quote(a.String())), nil
	}
	return []byte(strconv.Itoa(a.tokens)), nil
}
