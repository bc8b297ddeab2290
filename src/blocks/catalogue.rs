//! The mxblocks v1 catalogue as data: one row per block type, each with its required and
//! optional fields, their kinds and caps. The checking engine (`check.rs`) interprets the
//! rows; adding a block type is adding a row here (and a valid example in the tests).
//!
//! Caps not stated by upstream are ours (see the contract): strings ≤ 4,000 characters,
//! long text ≤ 16,000.

use super::rules::{self, Extra};

/// Most characters in a `str` field.
pub const MAX_STR: usize = 4_000;
/// Most characters in a `text` field (`code`, `diff`, `body`, `tex`).
pub const MAX_TEXT: usize = 16_000;

/// What a field may hold.
#[derive(Debug)]
pub enum Kind {
    /// Non-empty string, ≤ [`MAX_STR`] characters.
    Str,
    /// String, may be long, ≤ [`MAX_TEXT`] characters.
    Text,
    /// One line of 1..=n characters.
    Line(usize),
    /// Integer or decimal string.
    Num,
    Int,
    Bool,
    /// http(s) or mxc URL.
    Url,
    /// `mxc://server/id`.
    Mxc,
    /// ISO 8601 date-time.
    Time,
    /// A button id: 1-64 characters of `[A-Za-z0-9_.:-]`.
    Id,
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// A string or a number (table cells, field values).
    Scalar,
    /// An array of `item`, `min..=max` long.
    List {
        item: &'static Kind,
        min: usize,
        max: usize,
    },
    /// An object with these fields.
    Object {
        fields: &'static [Field],
        strict: bool,
    },
    /// Either of two kinds (the first that fits wins; errors come from the second).
    Either(&'static Kind, &'static Kind),
}

/// One field of a block or nested object.
#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub required: bool,
    pub kind: Kind,
}

/// One row of the catalogue.
#[derive(Debug)]
pub struct BlockSpec {
    pub name: &'static str,
    /// What the block is for, shown to the model in the tool description (empty when
    /// its name says it).
    pub use_for: &'static str,
    pub fields: &'static [Field],
    /// Action blocks are strictly typed: unknown fields are refused.
    pub strict: bool,
    /// A check that spans fields (table cells vs columns, chart points, form options).
    pub extra: Option<Extra>,
}

const fn req(name: &'static str, kind: Kind) -> Field {
    Field { name, required: true, kind }
}
const fn opt(name: &'static str, kind: Kind) -> Field {
    Field { name, required: false, kind }
}

const STATES: &[&str] = &["pending", "active", "done", "failed", "skipped"];

const ACTION: Kind = Kind::Either(
    &Kind::Object { fields: &[req("type", Kind::OneOf(&["react"])), req("key", Kind::Line(64))], strict: true },
    &Kind::Object { fields: &[req("type", Kind::OneOf(&["send"])), req("body", Kind::Str)], strict: true },
);

/// A button: in `buttons`, `chips` and card `actions`.
pub const BUTTON: Kind = Kind::Object {
    fields: &[
        req("label", Kind::Line(80)),
        req("action", ACTION),
        opt("style", Kind::OneOf(&["default", "primary", "danger"])),
        opt("id", Kind::Id),
    ],
    strict: true,
};

const STEP: Kind =
    Kind::Object { fields: &[req("label", Kind::Str), req("state", Kind::OneOf(STATES))], strict: false };

const CARD_FIELDS: &[Field] = &[
    req("title", Kind::Str),
    opt("subtitle", Kind::Str),
    opt("image", Kind::Mxc),
    opt("price", Kind::Num),
    opt("currency", Kind::Str),
    opt("url", Kind::Url),
    opt(
        "fields",
        Kind::List {
            item: &Kind::Object { fields: &[req("label", Kind::Str), req("value", Kind::Scalar)], strict: false },
            min: 1,
            max: 50,
        },
    ),
    opt("actions", Kind::List { item: &BUTTON, min: 1, max: 4 }),
];

const COLUMN: Kind = Kind::Either(
    &Kind::Str,
    &Kind::Object {
        fields: &[
            req("key", Kind::Str),
            req("label", Kind::Str),
            opt("align", Kind::OneOf(&["left", "center", "right"])),
        ],
        strict: false,
    },
);

const ROW: Kind =
    Kind::Either(&Kind::List { item: &Kind::Scalar, min: 0, max: 20 }, &Kind::Object { fields: &[], strict: false });

const SERIES: Kind = Kind::Either(
    &Kind::Num,
    &Kind::Object {
        fields: &[opt("name", Kind::Str), req("values", Kind::List { item: &Kind::Num, min: 1, max: 500 })],
        strict: false,
    },
);

/// The catalogue. Order: action blocks, then display blocks as in the contract.
pub static CATALOGUE: &[BlockSpec] = &[
    BlockSpec {
        name: "buttons",
        use_for: "a quick decision (1-8 buttons)",
        fields: &[req("buttons", Kind::List { item: &BUTTON, min: 1, max: 8 })],
        strict: true,
        extra: None,
    },
    BlockSpec {
        name: "chips",
        use_for: "quick replies (1-12)",
        fields: &[req("chips", Kind::List { item: &BUTTON, min: 1, max: 12 })],
        strict: true,
        extra: None,
    },
    BlockSpec {
        name: "table",
        use_for: "comparing options, listing rows",
        fields: &[
            req("columns", Kind::List { item: &COLUMN, min: 1, max: 20 }),
            req("rows", Kind::List { item: &ROW, min: 1, max: 200 }),
            opt("caption", Kind::Str),
        ],
        strict: false,
        extra: Some(rules::table_cells),
    },
    BlockSpec {
        name: "chart",
        use_for: "a trend, numbers over time",
        fields: &[
            req("series", Kind::List { item: &SERIES, min: 1, max: 500 }),
            opt("kind", Kind::OneOf(&["line", "bar", "area"])),
            opt("labels", Kind::List { item: &Kind::Str, min: 1, max: 500 }),
            opt("title", Kind::Str),
            opt("unit", Kind::Str),
        ],
        strict: false,
        extra: Some(rules::chart_series),
    },
    BlockSpec {
        name: "sources",
        use_for: "links you used",
        fields: &[req(
            "sources",
            Kind::List {
                item: &Kind::Object { fields: &[req("title", Kind::Str), req("url", Kind::Url)], strict: false },
                min: 1,
                max: 20,
            },
        )],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "card",
        use_for: "one product, listing or order",
        fields: CARD_FIELDS,
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "cards",
        use_for: "a few products or listings (≤ 10)",
        fields: &[req(
            "cards",
            Kind::List { item: &Kind::Object { fields: CARD_FIELDS, strict: false }, min: 1, max: 10 },
        )],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "progress",
        use_for: "multi-step work",
        fields: &[req("steps", Kind::List { item: &STEP, min: 1, max: 50 }), opt("title", Kind::Str)],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "details",
        use_for: "long optional text",
        fields: &[req("summary", Kind::Str), req("body", Kind::Text)],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "code",
        use_for: "",
        fields: &[req("code", Kind::Text), opt("language", Kind::Str), opt("filename", Kind::Str)],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "diff",
        use_for: "a patch",
        fields: &[req("diff", Kind::Text), opt("filename", Kind::Str)],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "countdown",
        use_for: "a deadline",
        fields: &[req("until", Kind::Time), opt("label", Kind::Str)],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "event",
        use_for: "a meeting, flight, booking",
        fields: &[
            req("title", Kind::Str),
            req("start", Kind::Time),
            opt("end", Kind::Time),
            opt("location", Kind::Str),
            opt("url", Kind::Url),
            opt("description", Kind::Text),
        ],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "place",
        use_for: "one venue or address",
        fields: &[
            req("name", Kind::Str),
            opt("address", Kind::Str),
            opt("lat", Kind::Num),
            opt("lon", Kind::Num),
            opt("url", Kind::Url),
            opt("rating", Kind::Num),
        ],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "ticker",
        use_for: "",
        fields: &[
            req("symbol", Kind::Str),
            req("price", Kind::Num),
            opt("change", Kind::Num),
            opt("currency", Kind::Str),
            opt("series", Kind::List { item: &Kind::Num, min: 1, max: 500 }),
        ],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "weather",
        use_for: "",
        fields: &[
            req("location", Kind::Str),
            req("temp", Kind::Num),
            opt("unit", Kind::OneOf(&["C", "F"])),
            opt("condition", Kind::Str),
            opt("high", Kind::Num),
            opt("low", Kind::Num),
        ],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "tracker",
        use_for: "live order/ride/parcel status (final edit: state \"done\")",
        fields: &[
            req("title", Kind::Str),
            req("state", Kind::Str),
            opt("steps", Kind::List { item: &STEP, min: 1, max: 50 }),
            opt("eta", Kind::Time),
            opt("detail", Kind::Str),
        ],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "math",
        use_for: "equations (TeX)",
        fields: &[req("tex", Kind::Text), opt("display", Kind::Bool), opt("caption", Kind::Line(200))],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "gallery",
        use_for: "2 or more images",
        fields: &[req(
            "images",
            Kind::List {
                item: &Kind::Object { fields: &[req("url", Kind::Mxc), opt("alt", Kind::Str)], strict: false },
                min: 2,
                max: 20,
            },
        )],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "file",
        use_for: "one upload",
        fields: &[req("url", Kind::Mxc), req("name", Kind::Str), opt("size", Kind::Int), opt("mimetype", Kind::Str)],
        strict: false,
        extra: None,
    },
    BlockSpec {
        name: "form",
        use_for: "several choices at once",
        fields: &[
            req("id", Kind::Id),
            req(
                "fields",
                Kind::List {
                    item: &Kind::Object {
                        fields: &[
                            req("name", Kind::Str),
                            req("label", Kind::Str),
                            req("kind", Kind::OneOf(&["select", "multi", "text", "bool"])),
                            opt("options", Kind::List { item: &Kind::Str, min: 1, max: 50 }),
                        ],
                        strict: false,
                    },
                    min: 1,
                    max: 20,
                },
            ),
            opt("submit", Kind::Line(80)),
        ],
        strict: false,
        extra: Some(rules::form_options),
    },
    BlockSpec {
        name: "stream",
        use_for: "a reply still being written",
        fields: &[req("id", Kind::Str), req("state", Kind::OneOf(&["live", "done"])), opt("url", Kind::Url)],
        strict: false,
        extra: None,
    },
];

/// The row for a block type, if it is in the catalogue.
pub fn spec(name: &str) -> Option<&'static BlockSpec> {
    CATALOGUE.iter().find(|s| s.name == name)
}

/// The known type names, in catalogue order (for error messages and tool descriptions).
pub fn names() -> impl Iterator<Item = &'static str> {
    CATALOGUE.iter().map(|s| s.name)
}
