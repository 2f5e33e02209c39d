//! Reading an exporter's page: Prometheus's text format (0.0.4) and OpenMetrics, which
//! share the sample line `name{label="value",...} value [timestamp]`. Only the families the
//! cluster view reads are kept (`wanted`), so a large page costs little more than its
//! scanning. A page is hostile input: a line that does not parse is counted, never fatal,
//! and a page with no sample line at all while it has text is an error ("not a metrics
//! page").

use super::series::Series;

/// What one page held.
#[derive(Debug, Default)]
pub struct Page {
    pub series: Vec<Series>,
    /// Sample lines that did not parse.
    pub bad_lines: usize,
    /// Sample lines that parsed, kept or not.
    pub good_lines: usize,
    /// The page held more samples to keep than this, the most kept: none are.
    pub too_many: Option<usize>,
}

/// Parses `text` from `instance`, keeping the samples whose name `wanted` accepts, at most
/// `max_kept` of them: past that the parse stops and the page is refused (`too_many`).
pub fn parse(text: &str, instance: &str, wanted: impl Fn(&str) -> bool, max_kept: usize) -> Page {
    let mut page = Page::default();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match sample(line) {
            Some((name, labels, value)) => {
                page.good_lines += 1;
                if wanted(name) {
                    if page.series.len() == max_kept {
                        page.too_many = Some(max_kept);
                        page.series = Vec::new();
                        break;
                    }
                    page.series.push(Series::new(name, labels, value, instance));
                }
            }
            None => page.bad_lines += 1,
        }
    }
    page
}

impl Page {
    /// Why the page is not a metrics page, when it is not.
    pub fn refusal(&self) -> Option<String> {
        if let Some(max) = self.too_many {
            return Some(format!(
                "refused: the metrics page holds more than {max} samples of the families read (its bound)"
            ));
        }
        (self.good_lines == 0 && self.bad_lines > 0).then(|| {
            format!(
                "not a metrics page ({} line{} that no exporter writes)",
                self.bad_lines,
                if self.bad_lines == 1 { "" } else { "s" }
            )
        })
    }
}

type Labels = Vec<(String, String)>;

fn sample(line: &str) -> Option<(&str, Labels, f64)> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_ascii_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let (parsed, after) = label_set(inner)?;
        labels = parsed;
        rest = after;
    }
    let mut fields = rest.split_ascii_whitespace();
    let value = number(fields.next()?)?;
    // An optional timestamp, then nothing (OpenMetrics may add an exemplar after `#`).
    match fields.next() {
        None => {}
        Some(ts)
            if ts.parse::<f64>().is_ok() && fields.next().is_some_and(|f| !f.starts_with('#')) =>
        {
            return None;
        }
        Some(ts) if ts.parse::<f64>().is_ok() => {}
        Some(f) if f.starts_with('#') => {}
        Some(_) => return None,
    }
    Some((name, labels, value))
}

/// `a="x",b="y"}` and what follows the closing brace.
fn label_set(text: &str) -> Option<(Labels, &str)> {
    let mut labels = Vec::new();
    let mut rest = text.trim_start();
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        let (value, after) = quoted(rest[eq + 1..].trim_start())?;
        labels.push((key.to_string(), value));
        rest = after.trim_start();
        if let Some(after) = rest.strip_prefix(',') {
            rest = after.trim_start();
        } else if !rest.starts_with('}') {
            return None;
        }
    }
}

/// A `"..."` value with `\\`, `\"` and `\n` escapes; the unescaped text and what follows.
fn quoted(text: &str) -> Option<(String, &str)> {
    let body = text.strip_prefix('"')?;
    let mut value = String::new();
    let mut chars = body.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Some((value, &body[at + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

fn number(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_escapes_timestamps_and_no_labels() {
        let text = "# HELP x y\n# TYPE x gauge\n\
                    DCGM_FI_DEV_FB_USED{gpu=\"0\",Hostname=\"a\\\"b\\\\c\\nd\"} 1024\n\
                    up 1 1700000000000\n\
                    vramscope_process_step{rank=\"3\",} 40 # {a=\"b\"} 1\n\
                    other_family 7\n";
        let page = parse(text, "n:9400", |n| n != "other_family", 10);
        assert_eq!(page.good_lines, 4);
        assert_eq!(page.bad_lines, 0);
        assert_eq!(page.series.len(), 3);
        assert_eq!(page.series[0].label("Hostname"), Some("a\"b\\c d"));
        assert_eq!(page.series[0].value, 1024.0);
        assert_eq!(page.series[1].name, "up");
        assert_eq!(page.series[2].label("rank"), Some("3"));
        assert!(page.refusal().is_none());
    }

    #[test]
    fn garbage_is_counted_and_a_page_of_it_refused() {
        let page = parse("<html>\n<body>oops</body>\n", "n:1", |_| true, 10);
        assert_eq!(page.good_lines, 0);
        assert!(page.refusal().unwrap().contains("not a metrics page"));
        let page = parse(
            "x{a=\"1\" 2\nx{a=1} 2\nx 1 2 3\ny{a=\"unterminated} 1\nz 5\n",
            "n:1",
            |_| true,
            10,
        );
        assert_eq!((page.good_lines, page.bad_lines), (1, 4));
        assert!(page.refusal().is_none());
        assert!(parse("", "n:1", |_| true, 10).refusal().is_none());
    }

    #[test]
    fn a_page_with_more_samples_to_keep_than_the_bound_is_refused_and_kept_empty() {
        let text = "a 1\nb 2\nc 3\n";
        let page = parse(text, "n:1", |n| n != "b", 2);
        assert_eq!(page.series.len(), 2);
        assert!(page.refusal().is_none());
        let page = parse(text, "n:1", |_| true, 2);
        assert!(page.series.is_empty());
        assert_eq!(
            page.refusal().unwrap(),
            "refused: the metrics page holds more than 2 samples of the families read (its bound)"
        );
    }
}
