package faqeval

import (
	"fmt"

	"github.com/durable-llm/durable-llm/policies/faq"
	"go.yaml.in/yaml/v3"
)

// Synthetic returns a knowledge base of n entries: the entries of base,
// then distinct made-up product-help entries in English and Chinese ("How
// do I descale the coffee machine?", "咖啡机怎么除垢？"), alternating, each
// with paraphrases and keywords like a real entry's. The same base and n
// give the same FAQ. It is for timing Match on a knowledge base of a
// realistic size; n must not be below base.Len() nor above what the word
// lists allow (base.Len() + 2 · products · tasks).
func Synthetic(base *faq.FAQ, n int) (*faq.FAQ, error) {
	entries := base.Entries()
	limit := len(entries) + 2*len(synthProducts)*len(synthTasks)
	if n < len(entries) || n > limit {
		return nil, fmt.Errorf("synthetic FAQ: %d entries asked, want %d to %d", n, len(entries), limit)
	}
	for i := 0; len(entries) < n; i++ {
		p := synthProducts[i/2%len(synthProducts)]
		t := synthTasks[i/2/len(synthProducts)]
		if i%2 == 0 {
			entries = append(entries, faq.Entry{
				ID:   fmt.Sprintf("synth-%s-%s-en", t.en, p.slug),
				Lang: "en",
				Questions: []string{
					fmt.Sprintf("How do I %s the %s?", t.en, p.en),
					fmt.Sprintf("%s %s instructions", p.en, t.en),
					fmt.Sprintf("Can you help me %s my %s?", t.en, p.en),
					fmt.Sprintf("What is the right way to %s a %s?", t.en, p.en),
				},
				Keywords: []string{p.en, t.en},
				Answer:   fmt.Sprintf("To %s the %s, follow section %d of its manual.", t.en, p.en, i%9+2),
			})
			continue
		}
		entries = append(entries, faq.Entry{
			ID:   fmt.Sprintf("synth-%s-%s-zh", t.en, p.slug),
			Lang: "zh",
			Questions: []string{
				fmt.Sprintf("%s怎么%s？", p.zh, t.zh),
				fmt.Sprintf("%s%s的步骤", p.zh, t.zh),
				fmt.Sprintf("请问%s需要%s吗？", p.zh, t.zh),
				fmt.Sprintf("教我%s%s", t.zh, p.zh),
			},
			Keywords: []string{p.zh, t.zh},
			Answer:   fmt.Sprintf("%s的%s方法见说明书第 %d 节。", p.zh, t.zh, i%9+2),
		})
	}
	data, err := yaml.Marshal(struct {
		Entries []faq.Entry `yaml:"entries"`
	}{entries})
	if err != nil {
		return nil, err
	}
	return faq.ParseFAQ(data, fmt.Sprintf("<synthetic %d entries>", n))
}

type synthProduct struct{ slug, en, zh string }

type synthTask struct{ en, zh string }

var synthProducts = []synthProduct{
	{"coffee", "coffee machine", "咖啡机"}, {"vacuum", "vacuum cleaner", "吸尘器"},
	{"watch", "smart watch", "智能手表"}, {"tent", "camping tent", "帐篷"},
	{"helmet", "bike helmet", "头盔"}, {"kettle", "electric kettle", "电水壶"},
	{"printer", "photo printer", "打印机"}, {"speaker", "bluetooth speaker", "蓝牙音箱"},
	{"lamp", "desk lamp", "台灯"}, {"fryer", "air fryer", "空气炸锅"},
	{"purifier", "air purifier", "空气净化器"}, {"scooter", "electric scooter", "电动滑板车"},
	{"mattress", "memory foam mattress", "记忆棉床垫"}, {"stroller", "baby stroller", "婴儿推车"},
	{"drill", "cordless drill", "电钻"}, {"camera", "action camera", "运动相机"},
	{"headphones", "noise cancelling headphones", "降噪耳机"}, {"router", "mesh router", "路由器"},
	{"toothbrush", "electric toothbrush", "电动牙刷"}, {"grill", "gas grill", "燃气烤炉"},
	{"sofa", "sofa bed", "沙发床"}, {"heater", "oil heater", "电暖器"},
	{"washer", "washing machine", "洗衣机"}, {"tablet", "kids tablet", "儿童平板"},
}

var synthTasks = []synthTask{
	{"assemble", "组装"}, {"clean", "清洁"}, {"install", "安装"}, {"repair", "维修"},
	{"register", "注册"}, {"descale", "除垢"}, {"pair", "配对"}, {"update", "升级"},
	{"store", "收纳"}, {"recycle", "回收"},
}
