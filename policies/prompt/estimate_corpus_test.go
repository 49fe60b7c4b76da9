package prompt

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
)

// The corpus EstimateTokens is measured on (TestEstimateTokensBounds):
// hand-written text of the kinds the worker sees, generated structured
// text, and the classic traps of cheap estimators.

type estClassSamples struct {
	name    string
	samples []string
}

var estEnglish = []string{
	`Exponential backoff with full jitter spreads retries over time, so the upstream gateway is not hit by a synchronized wave of requests after an outage. The client waits a random duration between zero and the current ceiling, and the ceiling doubles after every failure until it reaches a configured maximum.`,
	`When the circuit breaker opens, calls fail fast for a cool-down period instead of piling up behind a dead dependency. After the cool-down, a single probe request is allowed through; if it succeeds the breaker closes again, otherwise it stays open for another period. This protects both the caller's thread pool and the struggling service.`,
	`Preheat the oven to 220°C. Toss the potatoes with olive oil, coarse salt and a little rosemary, then spread them on a tray so that they don't touch. Roast for thirty-five minutes, turning once, until the edges are crisp and golden. Serve immediately with a squeeze of lemon.`,
	`The Treaty of Westphalia, signed in 1648, ended the Thirty Years' War and is often cited as the origin of the modern system of sovereign states. Historians debate how much the treaties themselves changed, but the idea that each state governs its own territory without outside interference became a cornerstone of international law.`,
	`"Where were you last night?" she asked, not looking up from the newspaper. He hesitated, then hung his coat on the hook by the door. "Working late. The quarterly numbers were due, and Henderson wanted everything reconciled before the board meeting." She turned a page. "Henderson called here at nine looking for you."`,
	`Patients presenting with chest pain should receive an electrocardiogram within ten minutes of arrival. Troponin levels are measured at presentation and again after three hours; a rising value suggests myocardial injury. Aspirin is given unless contraindicated, and the cardiology team is consulted for any ST-segment elevation.`,
	`The tenant shall pay the rent in advance on the first business day of each calendar month. If any payment is more than five days late, a late fee of fifty dollars shall be due. The landlord may not increase the rent during the initial term of this agreement, and any renewal shall be subject to thirty days' written notice.`,
	`Our Q3 revenue grew 14% year over year to $2.3 billion, driven primarily by subscription services, while operating margin expanded by 180 basis points. We repurchased 4.1 million shares and raised our full-year guidance. Free cash flow was $612 million, up from $498 million in the prior-year quarter.`,
	`Hi! Could you help me reset my password? I tried the "forgot password" link but the email never arrived. I've checked my spam folder too. My username is jsmith_1987 and the account was created back in 2019, I think.`,
	`Sure - I can help with that. I've sent a new reset link to the address on file (j***@example.com). It expires in 30 minutes. If it still doesn't arrive, let me know and we can verify your identity another way.`,
	`Photosynthesis converts light energy into chemical energy stored in glucose. In the light-dependent reactions, water is split and oxygen is released; in the Calvin cycle, carbon dioxide is fixed into organic molecules using ATP and NADPH produced earlier.`,
	`TL;DR: the bug was a race between the cache refresh and the eviction loop. Fix: take the lock before reading the generation counter. I've added a regression test (TestCacheRefreshRace) and benchmarked it; there's no measurable slowdown.`,
}

var estChinese = []string{
	`您好，请帮我查询订单 A-12345 的物流状态。我上周五下的单，到现在还没有收到货，页面上一直显示“运输中”。`,
	`您好，您的订单已经从上海仓库发出，预计明天下午送达，请保持电话畅通。如果需要修改收货地址，请在发货前联系客服，我们会尽快为您处理。`,
	`在分布式系统中，重试策略需要考虑幂等性、退避算法以及熔断机制。指数退避配合随机抖动可以避免重试风暴，熔断器在连续失败后短路请求，保护下游服务。`,
	`上游模型供应商因为节点切换出现了持续 5 秒的响应延迟毛刺，客户端立刻发起第二次重试，结果两次请求都超时，用户看到的是一个失败的回答。`,
	`根据《中华人民共和国合同法》的规定，当事人一方不履行合同义务或者履行合同义务不符合约定的，应当承担继续履行、采取补救措施或者赔偿损失等违约责任。`,
	`患者男性，五十六岁，因反复胸闷、气短三个月入院。既往有高血压病史十年，规律服用降压药物。入院查体：血压一百四十五比九十毫米汞柱，心率八十八次每分。`,
	`春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。床前明月光，疑是地上霜。举头望明月，低头思故乡。`,
	`孙子曰：兵者，国之大事，死生之地，存亡之道，不可不察也。故经之以五事，校之以计，而索其情：一曰道，二曰天，三曰地，四曰将，五曰法。`,
	`今天天气真好！我们一起去公园散步吧？顺便买点水果，苹果、香蕉、葡萄都可以。晚上回家做饭，我想吃红烧肉和清蒸鱼。`,
	`本季度公司营业收入同比增长百分之十四，达到二十三亿元，其中订阅服务贡献最大；经营利润率提升一点八个百分点，自由现金流为六亿一千二百万元。`,
	`請問這個產品有保固嗎？如果在使用過程中出現問題，應該聯絡哪個部門？我們公司在臺北和高雄都有辦公室。`,
}

var estMixed = []string{
	`请用 Python 写一个函数 retry_with_backoff(fn, max_attempts=5)，每次失败后等待 2**n 秒，并在日志里打印 "attempt n failed"。`,
	`这个 API 返回 HTTP 429 Too Many Requests 时，应该读取 Retry-After header，而不是立即重试。参考 RFC 6585 第四节。`,
	`我们在 Kubernetes 集群里部署了 3 个 replica，使用 Temporal worker 处理 LLM 调用；每个 workflow 的 timeout 设为 120s。`,
	`订单号：SO-2024-000123；金额：¥1,299.00；收件人：张伟（Zhang Wei）；电话：+86 138-0013-8000；地址：北京市朝阳区建国路 88 号 SOHO 现代城 A 座 1203 室。`,
	`Meeting notes 会议纪要: 1) 确认 Q3 roadmap ✅ 2) 讨论 latency 问题 (p99 > 2s) 3) 下周三 demo 给客户 @李经理 🚀`,
}

var estCode = []string{
	"func (c *Codec) Count(input string) (int, error) {\n\tvar count int\n\terr := c.tokenize(input, func(_ uint, _ string) {\n\t\tcount++\n\t})\n\treturn count, err\n}\n",
	"package main\n\nimport (\n\t\"fmt\"\n\t\"net/http\"\n\t\"time\"\n)\n\nfunc main() {\n\tclient := &http.Client{Timeout: 10 * time.Second}\n\tresp, err := client.Get(\"https://example.com/api/v1/orders?limit=50\")\n\tif err != nil {\n\t\tfmt.Println(\"request failed:\", err)\n\t\treturn\n\t}\n\tdefer resp.Body.Close()\n\tfmt.Printf(\"status=%d\\n\", resp.StatusCode)\n}\n",
	"def retry_with_backoff(fn, max_attempts=5, base=0.5):\n    \"\"\"Call fn until it succeeds, sleeping base * 2**n between attempts.\"\"\"\n    for attempt in range(max_attempts):\n        try:\n            return fn()\n        except TransientError as exc:\n            delay = base * (2 ** attempt) * random.uniform(0.5, 1.5)\n            logger.warning(\"attempt %d failed: %s; sleeping %.2fs\", attempt, exc, delay)\n            time.sleep(delay)\n    raise RetriesExhausted(f\"gave up after {max_attempts} attempts\")\n",
	"export async function fetchOrders(userId: string, opts: { limit?: number } = {}): Promise<Order[]> {\n  const url = `${API_BASE}/users/${encodeURIComponent(userId)}/orders?limit=${opts.limit ?? 20}`;\n  const res = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });\n  if (!res.ok) throw new HttpError(res.status, await res.text());\n  return (await res.json()).items.map((o: RawOrder) => ({ ...o, createdAt: new Date(o.created_at) }));\n}\n",
	"SELECT o.id, o.created_at, c.name AS customer, SUM(li.quantity * li.unit_price) AS total\nFROM orders o\nJOIN customers c ON c.id = o.customer_id\nLEFT JOIN line_items li ON li.order_id = o.id\nWHERE o.created_at >= NOW() - INTERVAL '30 days' AND o.status IN ('paid', 'shipped')\nGROUP BY o.id, c.name\nHAVING SUM(li.quantity) > 3\nORDER BY total DESC\nLIMIT 100;\n",
	"#!/usr/bin/env bash\nset -euo pipefail\nfor f in \"$@\"; do\n  if [[ ! -f \"$f\" ]]; then echo \"missing: $f\" >&2; exit 1; fi\n  sha256sum \"$f\" | awk '{print $1}' > \"${f}.sha256\"\ndone\ngrep -rn 'TODO' --include='*.go' . | wc -l\n",
	"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n  <title>Orders</title>\n  <style>.row{display:flex;gap:8px}.row>span{min-width:120px;color:#333}</style>\n</head>\n<body>\n  <div id=\"app\" class=\"container\"><ul><li><a href=\"/orders/123\">#123</a></li></ul></div>\n</body>\n</html>\n",
	"impl<T: Clone + Send + 'static> Pool<T> {\n    pub fn get(&self) -> Option<Arc<Mutex<T>>> {\n        let mut guard = self.inner.lock().unwrap();\n        guard.items.pop_front().map(|item| Arc::new(Mutex::new(item)))\n    }\n}\n",
	"models:\n  - name: qwen-72b\n    base_url: http://10.0.0.12:8000/v1\n    context_window: 32768\n    timeout: 60s\n    system_prompt: full\n  - name: qwen-14b\n    base_url: http://10.0.0.13:8000/v1\n    context_window: 8192\npruning:\n  factor: 0.5\n  reserve_output_tokens: 256\n",
	"    for (int i = 0; i < n; ++i) {\n        if (buf[i] == '\\n') { lines++; continue; }\n        sum += (unsigned char)buf[i] * 31u ^ (sum >> 7);\n    }\n    printf(\"%d lines, checksum %08x\\n\", lines, sum);\n",
}

var estMarkdown = []string{
	"# Release notes\n\n## v1.4.0 (2024-06-01)\n\n- **Added** `Fit` and `Build` to shape a prompt in one pass.\n- **Fixed** a race in the breaker (#1234).\n- *Deprecated* `FitWindow`; use `Fit` instead.\n\n| model | window | p50 | p99 |\n|-------|-------:|----:|----:|\n| qwen-72b | 32768 | 1.2s | 4.8s |\n| qwen-14b | 8192 | 0.4s | 1.9s |\n\n> Note: numbers are from the staging cluster.\n",
	"2024-06-01T12:00:03.123Z INFO  worker/llmcall.go:212 attempt=2 model=qwen-14b prompt_tokens=7321 latency_ms=1840 status=200\n2024-06-01T12:00:04.987Z WARN  worker/llmcall.go:219 attempt=3 model=qwen-7b class=timeout retry_in=2.5s\n2024-06-01T12:00:07.501Z ERROR frontdoor/handler.go:88 request_id=7f3c9a21-5b0e-4c1d-9e2f-aa01b2c3d4e5 err=\"upstream 502 Bad Gateway\" ip=192.168.10.24\n",
}

// estLatinPlain is Latin-script text that is not English and has no
// accented letter, so EstimateTokens prices it as English: the one class
// of the corpus where estUpper does not hold (reported, not asserted).
var estLatinPlain = []string{
	"Candide renfermait ses larmes ; la baronne pleurait.",
	"nihao pengyou, xiexie, zaijian, women yiqi qu chifan ba, gongzuo hen mang.",
	"Perusahaan pemerintahan menggunakan pelanggan untuk kebersihan.",
}

var estOther = []string{
	"Москва — столица России, город федерального значения, административный центр Центрального федерального округа и центр Московской области.",
	"Η Ελλάδα είναι χώρα της νοτιοανατολικής Ευρώπης, στο νοτιότερο άκρο της Βαλκανικής χερσονήσου, στην Ανατολική Μεσόγειο.",
	"اللغة العربية هي أكثر اللغات السامية تحدثًا، وإحدى أكثر اللغات انتشارًا في العالم، يتحدثها أكثر من 467 مليون نسمة.",
	"עברית היא שפה שמית, ממשפחת השפות האפרו-אסיאתיות, הידועה כשפתם של היהודים ושל השומרונים.",
	"हिन्दी विश्व की एक प्रमुख भाषा है और भारत की राजभाषा है। केन्द्रीय स्तर पर भारत में दूसरी आधिकारिक भाषा अंग्रेजी है।",
	"ภาษาไทย เป็นภาษาที่มีระดับเสียงของคำแน่นอนหรือวรรณยุกต์เช่นเดียวกับภาษาจีน และออกเสียงแยกคำต่อคำ",
	"Tiếng Việt, cũng gọi là tiếng Việt Nam hay Việt ngữ là ngôn ngữ của người Việt và là ngôn ngữ chính thức tại Việt Nam.",
	"Die deutsche Sprache ist eine westgermanische Sprache, die weltweit etwa 90 bis 105 Millionen Menschen als Muttersprache dient. Größe, übermäßig, Straße, Donaudampfschifffahrtsgesellschaft.",
	"Le français est une langue indo-européenne de la famille des langues romanes dont les locuteurs sont appelés francophones.",
	"El español o castellano es una lengua romance procedente del latín hablado, perteneciente a la familia de lenguas indoeuropeas. ¿Qué pasó? ¡Señor!",
	"한국어는 대한민국과 조선민주주의인민공화국의 공용어이다. 둘은 표기나 문법, 어휘에서는 약간의 차이가 있다.",
	"日本語は、日本国内や、かつての日本領だった国、そして国外移民や移住者を含む日本人同士の間で使用されている言語。ありがとうございます！",
	"Przedsiębiorstwo szczególnie dba o rzeczywistość; chrząszcz brzmi w trzcinie. Perusahaan pemerintahan menggunakan pelanggan. Järjestelmä ja tietokoneohjelmisto.",
	"Zhōngguó de shǒudū shì Běijīng.",
}

var estEmoji = []string{
	"👍😀🎉🚀❤️🔥✨🙏👨‍👩‍👧‍👦🏳️‍🌈🇨🇳🇺🇸👋🏽💯✅❌⚠️📦🧑‍💻",
	"Great job team 🎉🎉🎉 the release went out on time 🚀 thanks everyone 🙏❤️",
	"收到 👌 马上处理 💪 预计 10 分钟内完成 ⏱️✅",
	"→ ← ↑ ↓ • … — – “quoted” ‘single’ © ® ™ € £ ¥ ° ± × ÷ ≤ ≥ ≠ ∞ √ ∑ ∫ α β γ ① ② ③ ＡＢＣ１２３",
}

// estGenerated returns the generated classes: structured text and traps.
func estGenerated(rng *rand.Rand) []estClassSamples {
	words := strings.Fields("order status customer invoice shipping address amount currency total items quantity price created updated deleted enabled retry timeout model window tokens")
	pick := func() string { return words[rng.IntN(len(words))] }
	var json, digits, repeated, spaces, random []string

	// JSON, compact and indented, with nested objects, arrays, numbers
	// and Chinese values.
	for i := range 12 {
		var b strings.Builder
		var obj func(depth int)
		indent := i%2 == 1
		nl := func(depth int) {
			if indent {
				b.WriteString("\n" + strings.Repeat("  ", depth))
			}
		}
		obj = func(depth int) {
			b.WriteString("{")
			n := 2 + rng.IntN(5)
			for k := range n {
				nl(depth + 1)
				fmt.Fprintf(&b, "%q:", pick()+"_"+pick())
				if indent {
					b.WriteString(" ")
				}
				switch v := rng.IntN(7); {
				case v == 0 && depth < 3:
					obj(depth + 1)
				case v == 1:
					fmt.Fprintf(&b, "%d", rng.IntN(1_000_000))
				case v == 2:
					fmt.Fprintf(&b, "%.2f", rng.Float64()*1000)
				case v == 3:
					b.WriteString([]string{"true", "false", "null"}[rng.IntN(3)])
				case v == 4:
					fmt.Fprintf(&b, "%q", []string{"已发货", "上海仓库", "张伟", "待付款", "顺丰速运 SF1234567890"}[rng.IntN(5)])
				case v == 5:
					fmt.Fprintf(&b, "[%d, %d, %d]", rng.IntN(100), rng.IntN(100), rng.IntN(100))
				default:
					fmt.Fprintf(&b, "%q", pick()+" "+pick()+" "+pick())
				}
				if k < n-1 {
					b.WriteString(",")
				}
			}
			nl(depth)
			b.WriteString("}")
		}
		obj(0)
		json = append(json, b.String())
	}

	// Digit runs: long numbers, grouped numbers, phone numbers, decimals.
	for _, n := range []int{1, 2, 3, 4, 7, 10, 16, 33, 100, 1000} {
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		digits = append(digits, b.String())
	}
	digits = append(digits,
		"1,234,567,890.12 and 3.14159265358979 and 2024-06-01 12:30:45",
		"+86 138 0013 8000, (555) 123-4567, 4111 1111 1111 1111",
		"在 2023 年第 4 季度，共处理了 1234567 笔订单，平均 98.7 分。",
		strings.Repeat("12 ", 200), strings.Repeat("0", 500), strings.Repeat("9,", 300))

	// Repeated characters and patterns.
	for _, p := range []string{"a", "z", "A", "=", "-", "*", "_", ".", "!", "\"", "|", "~", "ab", "ha", "()", "{}", "-=", "x ", "啊", "哈", "é", "я", "😀", "。", "…", "<>", "aA", "zq"} {
		for _, n := range []int{3, 10, 50, 400} {
			repeated = append(repeated, strings.Repeat(p, n))
		}
	}

	// Whitespace runs.
	for _, p := range []string{" ", "\n", "\t", "\r\n", " \n", "\n\n\t", "  ", "\u3000", "\u00a0"} {
		for _, n := range []int{2, 5, 40, 500} {
			spaces = append(spaces, strings.Repeat(p, n), "x"+strings.Repeat(p, n)+"y", "1"+strings.Repeat(p, n)+"2", "."+strings.Repeat(p, n)+"{")
		}
	}
	spaces = append(spaces, "a\n\n\n\nb\n\n    c\t\t\td  \n  \n e", "    \n\t\n  \r\n   x   ")

	// Random strings: base64, hex, UUIDs, random letters and punctuation,
	// URLs.
	rnd := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for _, n := range []int{8, 32, 200, 2000} {
		raw := []byte(rnd("abcdefghijklmnopqrstuvwxyz0123456789!@#", n))
		random = append(random,
			base64.StdEncoding.EncodeToString(raw),
			hex.EncodeToString(raw),
			rnd("abcdefghijklmnopqrstuvwxyz", n),
			rnd("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", n),
			rnd("abcdefghijklmnopqrstuvwxyz0123456789", n),
			rnd("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", n),
			rnd("!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~ ", n),
		)
	}
	for range 5 {
		random = append(random, fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<16), rng.IntN(1<<16), rng.Uint64()&(1<<48-1)),
			fmt.Sprintf("https://cdn.example.com/assets/%s/%s.png?sig=%s&exp=%d", rnd("abcdef0123456789", 12), pick(), rnd("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", 43), rng.IntN(1<<31)))
	}
	return []estClassSamples{
		{"json", json}, {"digits", digits}, {"repeated", repeated},
		{"whitespace", spaces}, {"random", random},
	}
}

// estCorpus returns every class of the corpus.
func estCorpus(rng *rand.Rand) []estClassSamples {
	classes := []estClassSamples{
		{"english", estEnglish}, {"chinese", estChinese}, {"mixed", estMixed},
		{"code", estCode}, {"markdown+logs", estMarkdown}, {"other scripts", estOther},
		{"emoji+symbols", estEmoji},
	}
	// Long documents: many paragraphs of one class, and a mixed chat.
	long := func(parts []string, n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(parts[rng.IntN(len(parts))])
			b.WriteString("\n\n")
		}
		return b.String()
	}
	classes = append(classes, estGenerated(rng)...)
	var docs []string
	for _, c := range classes[:7] {
		docs = append(docs, long(c.samples, 40))
	}
	all := append(append(append(append([]string{}, estEnglish...), estChinese...), estCode...), estMixed...)
	docs = append(docs, long(all, 80))
	return append(classes, estClassSamples{"long documents", docs})
}
