//! What define and query answer beyond their rows: an unchanged define, a
//! page's total.

use super::*;

#[tokio::test]
async fn the_same_define_again_is_the_same_version() {
    let api = api();
    let first = ok(&api, "opcode.define", review()).await;
    let again = ok(&api, "opcode.define", review()).await;
    assert_eq!(again["version"], first["version"], "{again}");
    assert_eq!(again["unchanged"], true, "{again}");
    assert!(first.get("unchanged").is_none(), "{first}");
    let mut changed = review();
    changed["description"] = json!("now described");
    let next = ok(&api, "opcode.define", changed).await;
    assert_eq!(next["version"], "v2", "{next}");
}

#[tokio::test]
async fn a_page_says_the_total_and_whether_more_follow() {
    let api = api();
    ok(&api, "opcode.define", review()).await;
    for _ in 0..5 {
        ok(
            &api,
            "opcode.run",
            json!({"template_name": "review", "wait": false}),
        )
        .await;
    }
    let page = |offset: u32| {
        json!({"resource": "workflows", "filter": {"template_name": "review"},
               "limit": 2, "offset": offset})
    };
    let first = ok(&api, "opcode.query", page(0)).await;
    assert_eq!(
        (&first["count"], &first["total"], &first["has_more"]),
        (&json!(2), &json!(5), &json!(true))
    );
    let last = ok(&api, "opcode.query", page(4)).await;
    assert_eq!(
        (&last["count"], &last["total"], &last["has_more"]),
        (&json!(1), &json!(5), &json!(false))
    );
    let beyond = ok(&api, "opcode.query", page(9)).await;
    assert_eq!((&beyond["count"], &beyond["total"]), (&json!(0), &json!(5)));
    let schedules = ok(&api, "opcode.query", json!({"resource": "schedules"})).await;
    assert_eq!(schedules["total"], 0);
}
