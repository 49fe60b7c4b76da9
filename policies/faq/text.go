package faq

import (
	"math"
	"strings"
	"unicode"

	"github.com/durable-llm/durable-llm/policies/keyword"
)

// Feature weights. An English word counts 1 and each of its character
// trigrams 0.35 (trigrams let "refunded" meet "refund" and survive typos); a
// Chinese character bigram counts 1 and a single character 0.25.
const (
	faqWordWeight        = 1.0
	faqTrigramWeight     = 0.35
	faqBigramWeight      = 1.0
	faqUnigramWeight     = 0.25
	faqLoneCharWeight    = 1.0
	faqUnknownStretchExp = 0.25
)

// faqFeatures returns the weighted term frequencies of the features of s,
// folded by keyword.Fold: "w:" words, "t:" word trigrams, "b:" CJK bigrams,
// "u:" CJK characters.
func faqFeatures(s string, f *FAQ) map[string]float64 {
	tf := map[string]float64{}
	// The words of a stretch of Latin text, as phrase keys; a CJK run ends
	// the stretch.
	var keys []string
	addStem := func(stem string) {
		tf["w:"+stem] += faqWordWeight
		padded := " " + stem + " "
		for i := 0; i+3 <= len(padded); i++ {
			tf["t:"+padded[i:i+3]] += faqTrigramWeight
		}
	}
	flush := func() {
		for i := 0; i < len(keys); {
			if p := faqPhraseAt(keys[i:]); p != nil {
				for _, stem := range p.to {
					addStem(stem)
				}
				i += len(p.keys)
				continue
			}
			if !faqStopWords[keys[i]] {
				addStem(keys[i])
			}
			i++
		}
		keys = keys[:0]
	}
	faqScan(s, func(w string) {
		if !faqStopWords[w] && f != nil {
			w = f.fixTypo(w)
		}
		keys = append(keys, faqWordKey(w))
	}, func(run []rune) {
		flush()
		run = faqCJKSynonymRun(run)
		if f != nil {
			run = faqCJKSynonymRun(f.fixCJKTypos(run))
		}
		faqCJKFeatures(run, tf, f)
	})
	flush()
	return tf
}

// faqScript is the script an entry or a question is written in.
type faqScript int8

const (
	scriptUnknown faqScript = iota
	scriptLatin
	scriptCJK
)

// faqLangScript is the script of a language tag: CJK for zh, ja, ko,
// Latin for any other tag, unknown for none.
func faqLangScript(tag string) faqScript {
	primary, _, _ := strings.Cut(strings.ToLower(tag), "-")
	switch primary {
	case "":
		return scriptUnknown
	case "zh", "ja", "ko", "yue", "wuu", "cmn":
		return scriptCJK
	}
	return scriptLatin
}

// faqQuestionScript is the script most of the folded question s is written
// in: CJK when it has at least as many CJK characters as other words.
func faqQuestionScript(s string) faqScript {
	words, cjk := 0, 0
	faqScan(s, func(string) { words++ }, func(run []rune) { cjk += len(run) })
	switch {
	case cjk > 0 && cjk >= words:
		return scriptCJK
	case words > 0:
		return scriptLatin
	}
	return scriptUnknown
}

// faqScan cuts s into words (letters and digits; "what's" → "whats",
// "don't" → "dont": one word) and runs of CJK text, in order, and hands
// each to word or cjk. cjk's run is reused after it returns.
func faqScan(s string, word func(string), cjk func([]rune)) {
	var w strings.Builder
	var run []rune
	flushWord := func() {
		if w.Len() > 0 {
			word(w.String())
			w.Reset()
		}
	}
	flushCJK := func() {
		if len(run) > 0 {
			cjk(run)
			run = run[:0]
		}
	}
	for _, r := range s {
		switch {
		case faqIsCJK(r):
			flushWord()
			run = append(run, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			flushCJK()
			w.WriteRune(r)
		case (r == '\'' || r == '’') && w.Len() > 0:
		default:
			flushWord()
			flushCJK()
		}
	}
	flushWord()
	flushCJK()
}

// faqIsCJK reports whether r is written without spaces between words.
func faqIsCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

// faqCJKFeatures adds the bigrams and characters of a run of CJK text, cut
// at function words so that "我的订单到哪了" gives 订单 单到 到哪 and no
// bigram across a removed word.
func faqCJKFeatures(run []rune, tf map[string]float64, f *FAQ) {
	seg := 0 // start of the current segment
	emit := func(end int) {
		if end-seg == 1 {
			// A character alone between function words is a word (退 in
			// 能退吗, 坏 in 坏了).
			tf["u:"+string(run[seg])] += faqLoneCharWeight
			return
		}
		for i := seg; i < end; i++ {
			tf["u:"+string(run[i])] += faqUnigramWeight
		}
		// Bigrams; a stretch of k bigrams the FAQ never uses (搅拌 拌机) is
		// one word it does not know, and weighs k^0.75 bigrams, not k:
		// 1/k^0.25 each.
		for i := seg; i+1 < end; {
			b := "b:" + string(run[i:i+2])
			if f == nil || f.known(b) {
				tf[b] += faqBigramWeight
				i++
				continue
			}
			j := i + 1
			for j+1 < end && !f.known("b:"+string(run[j:j+2])) {
				j++
			}
			w := faqBigramWeight / math.Pow(float64(j-i), faqUnknownStretchExp)
			for ; i < j; i++ {
				tf["b:"+string(run[i:i+2])] += w
			}
		}
	}
	for i := 0; i < len(run); {
		if n := faqCJKStopAt(run[i:]); n > 0 {
			emit(i)
			i += n
			seg = i
			continue
		}
		i++
	}
	emit(len(run))
}

// faqCJKStopAt returns the length of the function word at the start of run,
// longest first, or 0.
func faqCJKStopAt(run []rune) int {
	for _, w := range faqCJKStopWords[run[0]] {
		if len(w) <= len(run) && string(run[:len(w)]) == string(w) {
			return len(w)
		}
	}
	return 0
}

// faqCJKStopWords are Chinese function words, by first character, longest
// first. They carry no topic: 怎么 and 请问 appear in questions about anything.
var faqCJKStopWords = func() map[rune][][]rune {
	words := []string{
		"请问", "怎么样", "怎么办", "怎么", "怎样", "如何", "什么", "为什么", "为啥",
		"可以", "能不能", "能否", "是否", "有没有", "是不是", "一下", "我们", "你们",
		"您好", "你好", "谢谢", "麻烦", "帮我", "这个", "那个", "现在", "已经",
		"一般", "的", "了", "吗", "呢", "吧", "啊", "呀", "哦", "嘛", "我", "你", "您",
		"能", "想", "要", "跟", "和", "弄", "还", "就", "都", "也", "个", "刚", "得",
	}
	m := map[rune][][]rune{}
	for _, w := range words {
		r := []rune(w)
		m[r[0]] = append(m[r[0]], r)
	}
	for _, ws := range m {
		// Longest first, so 怎么样 wins over 怎么.
		for i := 1; i < len(ws); i++ {
			for j := i; j > 0 && len(ws[j]) > len(ws[j-1]); j-- {
				ws[j], ws[j-1] = ws[j-1], ws[j]
			}
		}
	}
	return m
}()

// faqStopWords are English words that carry no topic.
var faqStopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		a an the and or but if so of to in on at by for with from about into as
		is are was were be been being am do does did done doing have has had
		i me my mine im ive you your yours youre we our us they them their
		he she him her it its this that these those there here
		what whats which who whom whose when where wheres why how hows
		can could would should will shall may might must cant couldnt wont
		dont doesnt didnt isnt arent wasnt werent havent hasnt hadnt
		not no yes any some all just still yet also very too really
		please pls hi hello hey thanks thank ok okay
		want wanna need like would get got let tell know help
		now right guys u ur r wat wot plz thx something anything thing things
		certain ago
	`) {
		m[w] = true
	}
	return m
}()

// faqStem strips common English inflections so that forms of a word meet:
// "refunds", "refunded", "refunding" → "refund"; "deliveries", "delivery" →
// "deliveri"; "cancelled", "cancel" → "cancel"; "charge", "charges" →
// "charg". It is deliberately crude; the trigram features absorb the rest.
func faqStem(w string) string {
	if len(w) < 4 || !faqASCIIWord(w) {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) >= 5:
		w = w[:len(w)-3] + "i"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") &&
		!strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	}
	switch {
	case strings.HasSuffix(w, "ing") && len(w) >= 6:
		w = w[:len(w)-3]
	case strings.HasSuffix(w, "ed") && len(w) >= 5:
		w = w[:len(w)-2]
	}
	switch {
	case strings.HasSuffix(w, "e") && len(w) >= 4:
		w = w[:len(w)-1]
	case strings.HasSuffix(w, "y") && len(w) >= 4:
		w = w[:len(w)-1] + "i"
	}
	if n := len(w); n >= 4 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiou0123456789", rune(w[n-1])) {
		w = w[:n-1]
	}
	return w
}

// faqASCIIWord reports whether w is ASCII letters and digits only.
func faqASCIIWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if !keyword.IsASCIIAlnum(w[i]) {
			return false
		}
	}
	return true
}
