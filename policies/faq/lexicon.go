package faq

import (
	"slices"
	"strings"
)

// The matcher's lexicon: words that mean the same to a shop's customer
// service, read as one word on both sides (the FAQ and the question), and
// Chinese characters typed for one another because they sound alike.

// faqSynonyms maps an English word (folded, before stemming) to the word it
// is read as: variants and irregular forms ("paid" → "pay", "took" →
// "take"), and words customers use for the same thing ("parcel",
// "shipment" → "package"; "reimbursed" → "refund"; "dispatch", "shipping"
// → "delivery"). It holds only words that mean the same in every question
// about a shop; a word with other senses ("bill": an invoice, or splitting
// a bill) is left out. Inflections of a listed word are read the same way
// (faqStemSynonyms): "reimburses" like "reimburse".
var faqSynonyms = func() map[string]string {
	groups := []string{
		// the thing that is delivered
		"package: parcel parcels packet packets shipment shipments stuff goods box boxes",
		"item: items product products article articles",
		// delivery: sending it, and who brings it
		"delivery: deliver delivered delivering delivers deliveries ship ships shipped shipping " +
			"dispatch dispatched dispatching despatch despatched courier couriers dhl fedex ups usps postman mailman",
		"arrive: arrival arrives arrived arriving eta come comes came coming",
		"refund: refunds refunded refunding reimburse reimbursed reimbursement repay repaid repayment chargeback",
		"return: returns returned returning exchange exchanged swap",
		"password: passwd pwd passcode passcodes pw",
		"login: logon signin",
		"cancel: cancellation cancelation canceled cancelled cancelling canceling",
		"phone: telephone tel phonenumber call calling ring",
		"human: humans person someone somebody people",
		"agent: rep reps representative representatives operator advisor advisors staff employee",
		"talk: speak speaking spoke chat chatting",
		"contact: reach",
		"buy: bought buying purchase purchased purchasing",
		"pay: paid paying payment payments transaction transactions",
		"fail: failed failing fails failure error errors",
		"declined: decline declines rejected rejects refused denied",
		"send: sent",
		"take: took taken",
		"forget: forgot forgotten",
		"broken: damaged defective faulty cracked smashed busted",
		"account: acct",
		"card: visa mastercard amex",
		"locked: frozen lockout",
		"disabled: deactivated",
		"blocked: banned",
		"money: funds cash",
		"email: mail",
		"attempt: tries",
		"receive: received recieve recieved",
		"abroad: overseas internationally international worldwide",
		"hour: hrs",
		"weekend: saturday saturdays sunday sundays sat sun",
		"holiday: christmas xmas easter thanksgiving",
		"warranty: guarantee guaranteed",
		"discount: coupon coupons voucher vouchers promo",
		"invoice: invoices",
		"receipt: receipts",
		"status: happening",
		"missing: lost",
		// places a shop ships to
		"country: countries us usa america canada mexico uk britain england scotland ireland france germany italy spain " +
			"portugal netherlands holland belgium switzerland austria sweden norway denmark finland poland europe eu " +
			"australia zealand japan korea china taiwan singapore malaysia india brazil argentina chile",
		"long: fast quickly soon",
	}
	m := map[string]string{}
	for _, g := range groups {
		to, from, _ := strings.Cut(g, ":")
		for _, w := range strings.Fields(from) {
			m[w] = to
		}
	}
	return m
}()

// faqStemSynonyms maps the stem of a word of faqSynonyms to the stem of the
// word it is read as, so that inflections the list does not spell out are
// read the same ("reimburses" → "refund").
var faqStemSynonyms = func() map[string]string {
	m := map[string]string{}
	for from, to := range faqSynonyms {
		if a, b := faqStem(from), faqStem(to); a != b && len(a) >= 4 {
			m[a] = b
		}
	}
	return m
}()

// faqPhrases are English phrases read as one word, on both sides: "log
// in", "sign in" → "login"; "send it back" → "return"; "how soon" → "how
// long"; "hasn't arrived", "never came" → "missing". A phrase is matched on
// the words as the FAQ reads them (typos corrected, synonyms and stems:
// "not recieved" is "not received"), with the stop words kept.
var faqPhrases = func() []faqPhrase {
	groups := []string{
		"login: log in|log into|log on|sign in|sign into|sign on",
		"refund: money back|charge back",
		"return: send back|send it back|send them back|ship back|ship it back|mail back|take back|bring back",
		"cancel: call off",
		"contact: get in touch|reach out|contact details",
		"arrive: get here|show up|turn up",
		"how long: how fast|how quickly|how soon|how many days|how many weeks|how much time",
		"fail: not working|doesnt work|does not work|dont work|didnt work|did not work|wont work|isnt working|" +
			"didnt go through|did not go through|wont go through|not going through|doesnt go through|not go through",
		"broken: stopped working|arrived broken",
		"missing: not received|havent received|hasnt arrived|havent arrived|havent got|hasnt come|never arrived|" +
			"never came|never received|never got|didnt receive|didnt arrive|didnt come|not arrived|not delivered|" +
			"havent been delivered|hasnt been delivered|still waiting|waiting for|waiting on|still not here|not here yet",
		"status: check on",
		"human: real person|live person|actual person",
		"discount: promo code|discount code|coupon code",
	}
	var out []faqPhrase
	for _, g := range groups {
		to, from, _ := strings.Cut(g, ":")
		var stems []string
		for _, w := range strings.Fields(to) {
			if !faqStopWords[w] {
				stems = append(stems, faqWord(w))
			}
		}
		for _, p := range strings.Split(from, "|") {
			var keys []string
			for _, w := range strings.Fields(p) {
				keys = append(keys, faqWordKey(w))
			}
			out = append(out, faqPhrase{keys: keys, to: stems})
		}
	}
	// Longest first, so "send it back" wins over "send back" (stable: equal
	// lengths keep the table's order).
	slices.SortStableFunc(out, func(a, b faqPhrase) int { return len(b.keys) - len(a.keys) })
	return out
}()

// faqPhrase is one phrase of faqPhrases: the keys of its words
// (faqWordKey), and the stems it is read as.
type faqPhrase struct {
	keys []string
	to   []string
}

// faqWordKey is the key a word is matched with in a phrase: a stop word
// itself, any other word its stem (faqWord).
func faqWordKey(w string) string {
	if faqStopWords[w] {
		return w
	}
	return faqWord(w)
}

// faqPhraseAt returns the phrase whose keys start keys, or nil.
func faqPhraseAt(keys []string) *faqPhrase {
	for i := range faqPhrases {
		p := &faqPhrases[i]
		if len(p.keys) <= len(keys) && slices.Equal(p.keys, keys[:len(p.keys)]) {
			return p
		}
	}
	return nil
}

// faqWord returns the stem w is read as: its synonym, stemmed.
func faqWord(w string) string {
	if c, ok := faqSynonyms[w]; ok {
		w = c
	}
	stem := faqStem(w)
	if c, ok := faqStemSynonyms[stem]; ok {
		stem = c
	}
	return stem
}

// faqCJKSynonyms are Chinese words replaced by the word the FAQ is read
// with, on both sides, longest first: variant characters (帐号 → 账号),
// a common mis-typed word (登陆 → 登录), couriers' names (顺丰 → 快递) and
// colloquial words for the same thing (退钱 → 退款, 星期天 → 周日).
var faqCJKSynonyms = func() [][2][]rune {
	pairs := [][2]string{
		{"帐号", "账号"}, {"帐户", "账户"}, {"账户", "账号"}, {"帐", "账"},
		{"登陆", "登录"}, {"登入", "登录"},
		{"顺丰", "快递"}, {"圆通", "快递"}, {"中通", "快递"}, {"申通", "快递"},
		{"韵达", "快递"}, {"邮政", "快递"}, {"京东物流", "快递"}, {"快件", "快递"},
		{"退钱", "退款"}, {"退费", "退款"}, {"返款", "退款"},
		{"星期天", "周日"}, {"星期日", "周日"}, {"礼拜天", "周日"}, {"礼拜日", "周日"},
		{"星期六", "周六"}, {"礼拜六", "周六"}, {"双休日", "周末"},
		{"国庆节", "国庆"}, {"春节期间", "春节"},
		{"说话", "聊天"}, {"沟通", "聊天"}, {"对话", "聊天"},
		{"客户服务", "客服"}, {"售后", "客服"},
		{"付钱", "付款"}, {"寄出", "发货"}, {"发出", "发货"}, {"运单", "单号"},
		{"修改", "改"}, {"更改", "改"},
		{"手机号", "电话"}, {"联系电话", "电话"},
	}
	out := make([][2][]rune, len(pairs))
	for i, p := range pairs {
		out[i] = [2][]rune{[]rune(p[0]), []rune(p[1])}
	}
	// Longest first, so 京东物流 wins over a shorter word inside it (stable:
	// equal lengths keep the table's order).
	slices.SortStableFunc(out, func(a, b [2][]rune) int { return len(b[0]) - len(a[0]) })
	return out
}()

// faqCJKSynonymRun returns run with faqCJKSynonyms replaced; run itself when
// none occurs.
func faqCJKSynonymRun(run []rune) []rune {
	var out []rune
	for i := 0; i < len(run); {
		hit := false
		for _, p := range faqCJKSynonyms {
			from := p[0]
			if len(from) <= len(run)-i && string(run[i:i+len(from)]) == string(from) {
				if out == nil {
					out = append(make([]rune, 0, len(run)), run[:i]...)
				}
				out = append(out, p[1]...)
				i += len(from)
				hit = true
				break
			}
		}
		if !hit {
			if out != nil {
				out = append(out, run[i])
			}
			i++
		}
	}
	if out == nil {
		return run
	}
	return out
}

// faqHomophones are groups of Chinese characters that sound alike (the same
// pinyin, tones ignored) and that a pinyin keyboard offers for one another:
// 包果 for 包裹, 退宽 for 退款, 取销 for 取消. Only characters of a shop's
// customer service are listed.
var faqHomophones = func() map[rune][]rune {
	groups := []string{
		"果裹过国锅", "宽款", "在再", "的得地", "消销小效", "码马吗", "票漂飘",
		"流留六", "递第弟", "费废飞非", "号好", "货或获", "单但担", "订定顶",
		"付副复富", "支只之知", "退推腿", "密米秘", "登等灯", "录路露", "锁所索",
		"账帐张", "户护互", "运云允", "邮有油游由", "包保报宝", "快块", "物务误",
		"取去区", "客可刻", "电店点", "话化画", "人认仁", "工公功", "发法",
		"营赢迎", "业夜页", "间件见", "收手首", "到道倒", "假价架", "急及即寄几",
		"置制志", "改该", "税睡水", "抬台太", "头投", "冻动懂", "解结接借",
		"封风丰", "配陪赔", "送松", "达答打", "撤彻", "钱前", "款宽", "坏怀",
		"换还环", "班般搬", "值直职", "锁琐",
	}
	m := map[rune][]rune{}
	for _, g := range groups {
		rs := []rune(g)
		for _, r := range rs {
			for _, o := range rs {
				if o != r && !slices.Contains(m[r], o) {
					m[r] = append(m[r], o)
				}
			}
		}
	}
	return m
}()

// fixCJKTypos returns run with a character replaced by its homophone where
// the pair it forms with a neighbour is unknown to the FAQ and the
// homophone makes a pair the FAQ uses (包果 → 包裹). run is not changed; a
// copy is returned when a character is replaced.
func (f *FAQ) fixCJKTypos(run []rune) []rune {
	known := func(a, b rune) bool { return f.known("b:" + string([]rune{a, b})) }
	out := run
	for i := 0; i+1 < len(out); i++ {
		a, b := out[i], out[i+1]
		if known(a, b) {
			continue
		}
		fixed := false
		for _, h := range faqHomophones[b] {
			if known(a, h) {
				out = faqReplaceRune(out, run, i+1, h)
				fixed = true
				break
			}
		}
		if fixed {
			continue
		}
		for _, h := range faqHomophones[a] {
			if known(h, b) && (i == 0 || !known(out[i-1], a)) {
				out = faqReplaceRune(out, run, i, h)
				break
			}
		}
	}
	return out
}

// faqReplaceRune sets out[i] = r, copying out first when it is still orig.
func faqReplaceRune(out, orig []rune, i int, r rune) []rune {
	if len(out) > 0 && len(orig) > 0 && &out[0] == &orig[0] {
		out = append([]rune(nil), orig...)
	}
	out[i] = r
	return out
}
