//! Which layouts' IDs grow with every issue of one generator, and the checks a batch must pass
//! before any of its IDs is handed out. Pure functions over the batch and what the server says
//! about the namespace.

use idmint_core::AnyId;
use idmint_proto::NamespaceInfo;

use crate::buffer::Ids;

/// What order a namespace's IDs come in, per generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Every ID of a generator is greater than the one issued before it: time (or a counter)
    /// in the most significant bits, node fields fixed. Batches must be strictly increasing,
    /// and so must the batches of one generator, one after another.
    Increasing,
    /// No numeric order the client can rely on (`lable` spreads time by reversing its bits,
    /// `trace-id` wraps every 388 days, custom layouts with other fields): batches must only
    /// hold no ID twice.
    Unordered,
}

/// The order of a namespace's IDs, as the server says (`NamespaceInfo::order`, from the
/// layout and the source). Only `increasing` gives batches an order to check; `periodic`,
/// `sharded`, `k-sorted`, `unordered` and anything else (a server that predates the field sends nothing) need only
/// distinct IDs.
pub(crate) fn order_of(info: &NamespaceInfo) -> Order {
    match info.order.parse::<idmint_core::Order>() {
        Ok(idmint_core::Order::Increasing) => Order::Increasing,
        _ => Order::Unordered,
    }
}

/// Checks a batch: non-empty, and strictly increasing (for [`Order::Increasing`]) or free of
/// repeats. Returns the offending pair.
pub(crate) fn check_batch(ids: &Ids, order: Order) -> Result<(), (AnyId, AnyId)> {
    match (ids, order) {
        (Ids::U64(v), Order::Increasing) => {
            increasing(v).map_err(|(a, b)| (AnyId::U64(a), AnyId::U64(b)))
        }
        (Ids::U128(v), Order::Increasing) => {
            increasing(v).map_err(|(a, b)| (AnyId::U128(a), AnyId::U128(b)))
        }
        (Ids::U64(v), Order::Unordered) => {
            distinct(v).map_err(|(a, b)| (AnyId::U64(a), AnyId::U64(b)))
        }
        (Ids::U128(v), Order::Unordered) => {
            distinct(v).map_err(|(a, b)| (AnyId::U128(a), AnyId::U128(b)))
        }
    }
}

fn increasing<T: Copy + Ord>(ids: &[T]) -> Result<(), (T, T)> {
    match ids.windows(2).find(|w| w[0] >= w[1]) {
        Some(w) => Err((w[0], w[1])),
        None => Ok(()),
    }
}

fn distinct<T: Copy + Ord>(ids: &[T]) -> Result<(), (T, T)> {
    // Sorted order needs no copy in the common case.
    if increasing(ids).is_ok() {
        return Ok(());
    }
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    match sorted.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err((w[0], w[1])),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use idmint_core::Layout;

    use super::*;

    fn info(layout: &Layout) -> NamespaceInfo {
        NamespaceInfo {
            name: "default".into(),
            layout: layout.name().into(),
            fingerprint: layout.fingerprint(),
            id_bits: layout.id_bits(),
            js_safe: layout.is_js_safe(),
            default_format: layout.default_format().to_string(),
            generator_id: Some(0),
            ready: true,
            runs_out: None,
            ids_per_second: 1,
            generators: 1,
            auth: false,
            source: "generator".into(),
            order: layout.order().name().into(),
            generator_ids: vec![0],
            type_prefix: String::new(),
        }
    }

    #[test]
    fn every_builtin_layout_has_a_known_order() {
        let check = |name: &str, want: Order| {
            let layout = Layout::builtin(name).unwrap();
            assert_eq!(order_of(&info(&layout)), want, "{name}");
        };
        check("snowflake", Order::Increasing);
        check("sonyflake", Order::Increasing);
        check("sonyflake-v2", Order::Increasing);
        check("icicle", Order::Increasing);
        check("flake", Order::Increasing);
        check("js53", Order::Increasing);
        check("decimal-id", Order::Unordered);
        check("hot-guid", Order::Increasing);
        check("uuid7", Order::Increasing);
        check("sequence", Order::Increasing);
        check("lable", Order::Unordered);
        check("trace-id", Order::Unordered);
        let names: Vec<&str> = Layout::builtins().iter().map(|(name, _)| *name).collect();
        assert_eq!(names.len(), 12, "a new built-in layout needs a row above: {names:?}");
    }

    #[test]
    fn the_order_is_read_from_what_the_server_says() {
        let check = |order: &str, want: Order| {
            let mut info = info(&Layout::builtin("icicle").unwrap());
            info.order = order.into();
            assert_eq!(order_of(&info), want, "{order}");
        };
        check("increasing", Order::Increasing);
        check("k-sorted", Order::Unordered);
        check("periodic", Order::Unordered);
        check("sharded", Order::Unordered);
        check("unordered", Order::Unordered);
        check("", Order::Unordered);
        check("something else", Order::Unordered);
    }

    #[test]
    fn batches_are_checked() {
        let check = |ids: Ids, order: Order, want: Result<(), (u64, u64)>| {
            let want = want.map_err(|(a, b)| (AnyId::U64(a), AnyId::U64(b)));
            assert_eq!(check_batch(&ids, order), want, "{ids:?} {order:?}");
        };
        let u64s = |v: &[u64]| Ids::U64(v.into());
        check(u64s(&[1, 2, 3]), Order::Increasing, Ok(()));
        check(u64s(&[7]), Order::Increasing, Ok(()));
        check(u64s(&[1, 3, 2]), Order::Increasing, Err((3, 2)));
        check(u64s(&[1, 1]), Order::Increasing, Err((1, 1)));
        check(u64s(&[3, 1, 2]), Order::Unordered, Ok(()));
        check(u64s(&[3, 1, 3]), Order::Unordered, Err((3, 3)));
        assert_eq!(
            check_batch(&Ids::U128([5, 4].into()), Order::Increasing),
            Err((AnyId::U128(5), AnyId::U128(4)))
        );
        assert_eq!(check_batch(&Ids::U128([5, 4].into()), Order::Unordered), Ok(()));
    }
}
