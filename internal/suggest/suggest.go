// Package suggest finds the name a mistyped one was probably meant to be,
// for "did you mean" hints on unknown configuration keys, flags and
// commands.
package suggest

import "strings"

// Closest returns the candidate nearest to word by edit distance (one
// insertion, deletion, substitution or transposition of adjacent letters
// each, case ignored), and whether it is near enough to be a likely
// typo: at most one edit for words of up to four letters, two up to
// eight, three beyond. Ties go to the earlier candidate, so the result
// does not depend on anything but the order given.
func Closest(word string, candidates []string) (string, bool) {
	w := strings.ToLower(word)
	best, bestD := "", -1
	for _, c := range candidates {
		d := Distance(w, strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	limit := 3
	switch n := len([]rune(word)); {
	case n <= 4:
		limit = 1
	case n <= 8:
		limit = 2
	}
	if bestD < 0 || bestD > limit || bestD == 0 && best == word {
		return "", false
	}
	return best, true
}

// Distance is the optimal string alignment distance between a and b
// (Levenshtein distance with transpositions of adjacent runes), counted
// in runes.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows: two back (for transpositions), one back, current.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
