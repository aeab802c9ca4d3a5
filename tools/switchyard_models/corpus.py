"""Training text for the test tokenizers, written by this project and assembled from a seed.

The corpus mixes several scripts, source code, numbers, whitespace runs and emoji so that the
trained vocabularies contain multi-byte pieces, digit groups and code punctuation, which is
what the C++ tokenizers have to get right. Nothing is read from the machine, so the corpus
(and every tokenizer trained on it) is the same everywhere.
"""

import random

_PROSE = {
    "en": [
        "The engine keeps one loop thread that owns the scheduler and every sequence.",
        "A router admits requests, picks an endpoint and streams the response back.",
        "We don't block the event loop; it's the rule that keeps latency low.",
        "They're measuring time to first token, and we'll report it per tenant.",
        "The quick brown fox jumps over the lazy dog while the cache warms up.",
        "Prefix caching reuses blocks when two prompts share their first thousand tokens.",
        "If the queue is full, the request waits; a full cache is not a bug.",
        "She said: \"Tokenizers must round-trip every byte, even the odd ones.\"",
        "I've seen models that can't count letters, but they'd still write poems.",
        "Weather report: sunny in the morning, rain after 3pm, 17°C at night.",
    ],
    "de": [
        "Der Router verteilt die Anfragen gleichmäßig auf alle Knoten im Cluster.",
        "Über die Brücke fährt ein Zug mit großen Güterwagen nach Süden.",
        "Die Größe des Zwischenspeichers hängt von der Länge der Eingabe ab.",
        "Wir prüfen jede Änderung zweimal, bevor sie in die Hauptlinie kommt.",
    ],
    "fr": [
        "Le modèle génère une réponse après avoir lu toute la conversation.",
        "À côté de la gare, il y a un café où l'on parle de compilateurs.",
        "C'est très simple : chaque requête reçoit son propre identifiant.",
        "Les élèves préfèrent les exercices où l'on écrit du code en équipe.",
    ],
    "es": [
        "El servidor responde en español cuando la pregunta llega en español.",
        "¿Cuántos tokens caben en la caché? ¡Más de los que pensábamos!",
        "La niña leyó un libro pequeño sobre el océano y las montañas.",
    ],
    "ru": [
        "Маршрутизатор выбирает сервер с наименьшей нагрузкой и тёплым кэшем.",
        "Модель отвечает быстро, потому что ключи и значения уже вычислены.",
        "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    ],
    "el": [
        "Ο διακομιστής απαντά σε κάθε αίτημα με μια ροή από γεγονότα.",
        "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο.",
    ],
    "zh": [
        "路由器根据前缀缓存选择最合适的服务器。",
        "模型在生成第一个词之前需要先处理整个提示。",
        "今天天气很好，我们一起去公园散步吧。",
        "这个分词器必须正确处理每一个字节。",
    ],
    "ja": [
        "このモデルは日本語の質問にも答えることができます。",
        "東京の天気は晴れ、気温は二十度です。",
        "キャッシュが一杯になったら、古いブロックを追い出します。",
    ],
    "ko": [
        "라우터는 부하가 가장 적은 서버를 고릅니다.",
        "오늘은 날씨가 좋아서 산책하기에 딱 좋습니다.",
    ],
    "ar": [
        "يختار الموجه الخادم الأقل حملا لكل طلب جديد.",
        "النموذج يجيب بسرعة لأن الذاكرة المؤقتة جاهزة.",
    ],
    "hi": [
        "राउटर हर अनुरोध के लिए सबसे कम व्यस्त सर्वर चुनता है।",
        "आज मौसम बहुत अच्छा है और हम बाहर टहलने जा रहे हैं।",
    ],
    "vi": [
        "Bộ định tuyến chọn máy chủ có bộ nhớ đệm phù hợp nhất.",
        "Hôm nay trời đẹp, chúng ta đi dạo công viên nhé.",
    ],
}

_CODE = [
    "def add(a, b):\n    return a + b\n",
    "for i in range(10):\n    print(f\"step {i}: loss={0.5 / (i + 1):.3f}\")\n",
    "int main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n  return v.size() > 2 ? 0 : 1;\n}\n",
    "absl::StatusOr<Tokenizer> Load(std::string_view path) {\n  SY_ASSIGN_OR_RETURN(auto text, ReadFile(path));\n  return Parse(text);\n}\n",
    "{\"model\": \"tiny\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stream\": true}\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\n",
    "if (x != nullptr && x->size() <= 0x7fffffff) { return -1; }\n",
    "const add = (a, b) => a + b; // arrow function\nconsole.log(add(2, 3));\n",
    "<div class=\"row\"><span id='a1'>Hello &amp; welcome</span></div>\n",
    "fn main() {\n    let xs: Vec<u32> = (0..5).collect();\n    println!(\"{:?}\", xs);\n}\n",
    "#include <cstdio>\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\n",
    "curl -sS http://127.0.0.1:8000/v1/models | jq '.data[0].id'\n",
]

_EMOJI = ["🙂", "🚀", "🔥", "👍🏽", "❤️", "🇩🇪", "👩‍💻", "🎉", "✅", "🤖", "😀", "🌍"]

_WORDS = [
    "token", "cache", "block", "prefix", "router", "engine", "stream", "request", "latency",
    "throughput", "batch", "decode", "prefill", "kernel", "tensor", "layer", "attention",
    "sampler", "scheduler", "tenant", "queue", "model", "weights", "rope", "norm", "vocab",
]


def _numbers(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        return str(rng.randrange(10**rng.randrange(1, 12)))
    if kind == 1:
        return f"{rng.uniform(-1000, 1000):.{rng.randrange(1, 6)}f}"
    if kind == 2:
        return f"{rng.randrange(1990, 2031)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    if kind == 3:
        return f"{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}"
    return f"0x{rng.randrange(2**32):08x}"


def _whitespace(rng: random.Random) -> str:
    return rng.choice([" ", "  ", "   ", "\t", "\n", "\n\n", " \n", "\r\n", "    "])


def _mixed_line(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randrange(3, 12)):
        kind = rng.randrange(6)
        if kind == 0:
            parts.append(_numbers(rng))
        elif kind == 1:
            parts.append(rng.choice(_EMOJI))
        elif kind == 2:
            word = rng.choice(_WORDS)
            parts.append(word.upper() if rng.random() < 0.2 else word.capitalize() if rng.random() < 0.3 else word)
        elif kind == 3:
            parts.append(rng.choice(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "n't", "'S"]))
        elif kind == 4:
            parts.append(rng.choice(["...", "!", "?", ",", ";", ":", "--", "()", "[]", "{}", "==", "->", "%", "$"]))
        else:
            parts.append(rng.choice(rng.choice(list(_PROSE.values()))).split(" ")[0])
        parts.append(_whitespace(rng) if rng.random() < 0.2 else " ")
    return "".join(parts).rstrip(" ")


def build_corpus(seed: int, num_docs: int = 1200) -> list[str]:
    """Returns num_docs training documents; the same seed always gives the same list."""
    rng = random.Random(seed)
    all_prose = [s for lang in sorted(_PROSE) for s in _PROSE[lang]]
    docs = []
    for _ in range(num_docs):
        kind = rng.randrange(10)
        if kind < 5:
            docs.append(" ".join(rng.choice(all_prose) for _ in range(rng.randrange(1, 5))))
        elif kind < 7:
            docs.append(rng.choice(_CODE))
        else:
            docs.append(_mixed_line(rng))
    return docs
