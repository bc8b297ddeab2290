use serde_json::{Value, json};

use super::*;

fn chart(block: Value) -> Chart {
    Chart::from_block(block.as_object().expect("object")).expect("a chart")
}

/// The PNG decoded back: its size and how many pixels are near each palette colour.
fn decoded(png: &Png) -> (u32, u32, Vec<usize>, usize) {
    let img = image::load_from_memory_with_format(&png.bytes, image::ImageFormat::Png).expect("a PNG").to_rgb8();
    let near =
        |p: &image::Rgb<u8>, (r, g, b): (u8, u8, u8)| p.0.iter().zip([r, g, b]).all(|(a, b)| a.abs_diff(b) <= 12);
    let per_colour = PALETTE.iter().map(|c| img.pixels().filter(|p| near(p, *c)).count()).collect();
    let inked = img.pixels().filter(|p| p.0 != [255, 255, 255]).count();
    (img.width(), img.height(), per_colour, inked)
}

#[test]
fn a_line_chart_of_two_series_is_drawn_in_their_colours_at_twice_its_shown_size() {
    let c = chart(json!({"type": "chart", "title": "Revenue", "unit": "k€", "labels": ["Q1", "Q2", "Q3", "Q4"],
        "series": [{"name": "Revenue", "values": [12, 15.5, 14, 19]}, {"name": "Costs", "values": ["9.5", 10, 11, 12]}]}));
    let png = draw(&c).expect("drawn");
    let (w, h, colours, inked) = decoded(&png);
    assert_eq!((w, h), (SHOWN.0 * 2, SHOWN.1 * 2));
    assert_eq!((png.width, png.height), (w, h));
    assert!(inked > (w * h / 100) as usize, "not blank: {inked} pixels inked");
    assert!(colours[0] > 500 && colours[1] > 500, "both series' colours are drawn: {colours:?}");
    assert!(colours[2] < 50, "no third series: {colours:?}");
}

#[test]
fn bars_and_areas_are_filled_and_a_bare_series_of_numbers_is_one_series() {
    for kind in ["bar", "area"] {
        let c = chart(json!({"type": "chart", "kind": kind, "series": [3, 4, 5, -2]}));
        assert_eq!(c.series.len(), 1);
        let (_, _, colours, _) = decoded(&draw(&c).expect("drawn"));
        // Bars are filled in the colour; an area is outlined in it (its fill is lighter).
        let least = if kind == "bar" { 5_000 } else { 1_000 };
        assert!(colours[0] > least, "{kind}: drawn in the first colour: {colours:?}");
    }
}

#[test]
fn many_points_and_odd_values_still_draw() {
    let values: Vec<Value> = (0..500).map(|i| json!(f64::from(i).sin() * 1e6)).collect();
    let labels: Vec<Value> = (0..500).map(|i| json!(format!("a very long label number {i}"))).collect();
    let series: Vec<Value> = (0..8).map(|s| json!({"name": format!("s{s}"), "values": values})).collect();
    let (_, _, colours, _) =
        decoded(&draw(&chart(json!({"type": "chart", "series": series, "labels": labels}))).expect("drawn"));
    assert!(colours[7] > 0, "eight series: {colours:?}");
    // One value, all equal, or non-numbers among numbers.
    for series in [json!([7]), json!([2, 2, 2]), json!([1, "x", 3])] {
        draw(&chart(json!({"type": "chart", "series": series}))).expect("drawn");
    }
    assert!(Chart::from_block(json!({"type": "chart", "series": ["x"]}).as_object().expect("object")).is_none());
}

#[test]
fn the_description_says_the_data_in_words() {
    let c = chart(json!({"type": "chart", "kind": "bar", "title": "Rain", "unit": "mm", "labels": ["Mon", "Tue"],
        "series": [{"name": "Lisbon", "values": [1.5, 0]}, {"values": [3]}]}));
    assert_eq!(describe(&c), "Bar chart: Rain (mm). Lisbon: Mon 1.5, Tue 0. Series 2: Mon 3.");
    assert_eq!(
        (format_number(2.0), format_number(-0.0), format_number(1.23456)),
        ("2".into(), "0".into(), "1.2346".into())
    );
}

#[test]
fn extreme_values_are_drawn_or_refused_at_once_never_looped_on() {
    let extremes: Vec<(&str, Kind, Vec<f64>)> = vec![
        ("the largest double", Kind::Bar, vec![1.0, 1.7e308]),
        ("the largest double, negative", Kind::Area, vec![-1.7e308, 2.0]),
        ("a line spanning the doubles", Kind::Line, vec![-1.7e308, 1.7e308]),
        ("the smallest subnormal", Kind::Bar, vec![5e-324]),
        ("subnormals on a line", Kind::Line, vec![5e-324, 1e-323]),
        ("one ULP of span at the bound", Kind::Line, vec![1e15 - 0.125, 1e15]),
        ("equal at the bound", Kind::Area, vec![-1e15, -1e15]),
        ("all equal", Kind::Line, vec![7.0, 7.0, 7.0]),
        ("all NaN", Kind::Bar, vec![f64::NAN, f64::NAN]),
        ("infinities", Kind::Line, vec![f64::INFINITY, f64::NEG_INFINITY]),
    ];
    let (done, results) = std::sync::mpsc::channel();
    for (what, kind, values) in extremes.clone() {
        let done = done.clone();
        std::thread::spawn(move || {
            let c = Chart {
                kind,
                title: None,
                unit: None,
                labels: Vec::new(),
                series: vec![Series { name: "x".into(), values }],
            };
            let _ = done.send((what, draw(&c).map(|png| png.bytes.len())));
        });
    }
    drop(done);
    let mut seen = std::collections::HashMap::new();
    // Generous for a loaded machine: each drawing takes about a tenth of a second.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while seen.len() < extremes.len() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let (what, result) = results.recv_timeout(left).unwrap_or_else(|_| {
            let stuck: Vec<_> = extremes.iter().map(|e| e.0).filter(|w| !seen.contains_key(w)).collect();
            panic!("drawings never ended: {stuck:?}")
        });
        seen.insert(what, result);
    }
    for refused in
        ["the largest double", "the largest double, negative", "a line spanning the doubles", "all NaN", "infinities"]
    {
        assert!(seen[refused].is_err(), "{refused}: refused, left to its numbers: {:?}", seen[refused]);
    }
    for drawn in [
        "the smallest subnormal",
        "subnormals on a line",
        "one ULP of span at the bound",
        "equal at the bound",
        "all equal",
    ] {
        assert!(seen[drawn].is_ok(), "{drawn}: drawn: {:?}", seen[drawn]);
    }
}
