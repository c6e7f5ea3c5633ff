//! Exact medians and statistics of [`Dist`] against the values sorted: one pass or several,
//! merged, repeated values, sample standard deviations.

use super::*;

fn median_of(values: &[u64]) -> (u64, usize) {
    median_in(values, SELECT_BUCKETS)
}

/// The median, and the passes it took with selections of `buckets` buckets.
fn median_in(values: &[u64], buckets: u128) -> (u64, usize) {
    let mut d = Dist::default();
    for &v in values {
        d.add(v);
    }
    let mut passes = 1;
    while d.end_pass_with(buckets) {
        passes += 1;
        for &v in values {
            d.select(v);
        }
    }
    (d.median(), passes)
}

/// The median as pandas takes it (the mean of the two middle values of an even
/// count), rounded down.
fn sorted_median(values: &[u64]) -> u64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    ((u128::from(v[(v.len() - 1) / 2]) + u128::from(v[v.len() / 2])) / 2) as u64
}

#[test]
fn log_buckets_cover_every_value() {
    for v in [
        0u64,
        1,
        15,
        16,
        17,
        31,
        32,
        1000,
        1 << 40,
        u64::MAX - 1,
        u64::MAX,
    ] {
        let (lo, hi) = log_range(log_bucket(v));
        assert!(lo <= v && v <= hi, "{v}: {lo}..={hi}");
    }
    assert_eq!(log_bucket(u64::MAX), LOG_BUCKETS - 1);
    for b in 1..LOG_BUCKETS {
        assert_eq!(log_range(b).0, log_range(b - 1).1 + 1);
    }
}

#[test]
fn medians_are_exact_in_one_pass_or_several() {
    // Few distinct values: one pass.
    assert_eq!(median_of(&[40, 10, 30, 20]), (25, 1));
    assert_eq!(median_of(&[40, 10, 30, 21]), (25, 1));
    assert_eq!(median_of(&[40, 10, 30]), (30, 1));
    assert_eq!(median_of(&[7]), (7, 1));
    assert_eq!(median_of(&[u64::MAX, u64::MAX - 2]), (u64::MAX - 1, 1));
    // Many: the histogram, then selection passes.
    let mut x = 12345u64;
    let values: Vec<u64> = (0..100_000)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 20
        })
        .collect();
    let (m, passes) = median_of(&values);
    assert_eq!(m, sorted_median(&values));
    assert!(passes > 1);
    let wide: Vec<u64> = (0..5_000u64).map(|i| i * 1_000_003 + (i % 7)).collect();
    assert_eq!(median_of(&wide).0, sorted_median(&wide));
    let extreme: Vec<u64> = (0..1_000u64).map(|i| u64::MAX - i * 3).collect();
    assert_eq!(median_of(&extreme).0, sorted_median(&extreme));
    let even: Vec<u64> = (0..1_000u64).collect();
    assert_eq!(median_of(&even).0, 499);
    // Many distinct values, an even count: the two middle values found by passes of
    // their own (500 and 10_000_000 here, in different histogram buckets).
    let split: Vec<u64> = (0..300u64)
        .map(|i| i + 200)
        .chain((0..300u64).map(|i| 10_000_000 + i * 1_000))
        .collect();
    let (m, passes) = median_of(&split);
    assert_eq!(m, (499 + 10_000_000) / 2);
    assert_eq!(m, sorted_median(&split));
    assert!(passes > 1);
    let odd: Vec<u64> = split.iter().copied().chain([7]).collect();
    assert_eq!(median_of(&odd).0, 499);
    // Values around 1_000_000: a histogram bucket 65 536 wide holds the median. Buckets
    // of 1024 settle it in two selection passes, of 65 536 in one; fewer than 1024 are
    // 1024.
    let near: Vec<u64> = (0..20_001u64).map(|i| 1_000_000 + i * 3 % 60_000).collect();
    let want = sorted_median(&near);
    assert_eq!(median_in(&near, 1 << 16), (want, 2));
    assert_eq!(median_in(&near, SELECT_BUCKETS), (want, 3));
    assert_eq!(median_in(&near, 2), (want, 3));
}

#[test]
fn merged_distributions_agree_with_one() {
    let a: Vec<u64> = (0..600u64).map(|i| i * 31 % 1000).collect();
    let b: Vec<u64> = (0..10u64).collect();
    let (mut da, mut db) = (Dist::default(), Dist::default());
    a.iter().for_each(|&v| da.add(v));
    b.iter().for_each(|&v| db.add(v));
    db.merge(&da);
    let all: Vec<u64> = b.iter().chain(&a).copied().collect();
    while db.end_pass() {
        all.iter().for_each(|&v| db.select(v));
    }
    assert_eq!(db.median(), sorted_median(&all));
    assert_eq!(db.count, 610);
}

#[test]
fn repeated_values_count_whatever_comes_next() {
    // Runs of one value, ending as a merge, a switch to the histogram or a pass's end
    // reads the counts: each median as that of the values sorted.
    let runs = |values: &[(u64, usize)]| -> Vec<u64> {
        values
            .iter()
            .flat_map(|&(v, n)| std::iter::repeat_n(v, n))
            .collect()
    };
    let few = runs(&[(5, 3), (7, 1), (5, 4), (9, 6), (9, 1)]);
    let many: Vec<u64> = (0..300u64).flat_map(|i| [i * 7, i * 7]).collect();
    for (x, y) in [(&few, &few), (&few, &many), (&many, &few), (&many, &many)] {
        let (mut dx, mut dy) = (Dist::default(), Dist::default());
        x.iter().for_each(|&v| dx.add(v));
        y.iter().for_each(|&v| dy.add(v));
        dx.merge(&dy);
        let all: Vec<u64> = x.iter().chain(y.iter()).copied().collect();
        while dx.end_pass() {
            all.iter().for_each(|&v| dx.select(v));
        }
        assert_eq!(dx.median(), sorted_median(&all));
        assert_eq!(dx.count, all.len() as u64);
    }
    assert_eq!(median_of(&few).0, sorted_median(&few));
    assert_eq!(median_of(&runs(&[(3, 10), (1, 11)])).0, 1);
}

fn stddev_of(values: &[u64]) -> u64 {
    let mut d = Dist::default();
    values.iter().for_each(|&v| d.add(v));
    while d.end_pass() {
        values.iter().for_each(|&v| d.select(v));
    }
    d.stats().stddev
}

#[test]
fn standard_deviations_are_sample_ones() {
    // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations 32, / 7 = 4.571, √ = 2.138.
    assert_eq!(stddev_of(&[2, 4, 4, 4, 5, 5, 7, 9]), 2);
    // 1000, 1200, 100: mean 766.67, squared deviations 686_666.67, / 2, √ = 585.95.
    assert_eq!(stddev_of(&[1000, 1200, 100]), 585);
    assert_eq!(stddev_of(&[7]), 0);
    assert_eq!(stddev_of(&[]), 0);
    // Past 128 bits for Σx² (3·2^124). 2^62 three times and 0: mean 3·2^60.
    let big = 1u64 << 62;
    let values = [big, big, big, 0];
    // Deviations: 2^60 three times, -3·2^60 once: Σ = 12·2^120, / 3 = 2^122, √ = 2^61.
    assert_eq!(stddev_of(&values), 1 << 61);
    // Merged from two folds: the same.
    let (mut a, mut b) = (Dist::default(), Dist::default());
    a.add(big);
    a.add(0);
    b.add(big);
    b.add(big);
    a.merge(&b);
    assert_eq!(a.stats().stddev, 1 << 61);
    let (mut a, mut b) = (Dist::default(), Dist::default());
    [2u64, 4, 4].iter().for_each(|&v| a.add(v));
    [4u64, 5, 5, 7, 9].iter().for_each(|&v| b.add(v));
    b.merge(&a);
    assert_eq!(b.stats().stddev, 2);
}

#[test]
fn selections_of_any_bucket_count_find_the_sorted_median() {
    // Buckets whose count is no power of two (a fold's budget shared among its rows) make
    // spans no power of two either: widths rounded up to one still narrow to the median.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (n, spread) in [
        (1001usize, 1u64 << 40),
        (5000, 3_000_017),
        (20_000, u64::MAX),
    ] {
        let values: Vec<u64> = (0..n).map(|_| next() % spread).collect();
        let want = sorted_median(&values);
        for buckets in [SELECT_BUCKETS, 1500, 6553, 87_381, 1 << 16] {
            assert_eq!(
                median_in(&values, buckets).0,
                want,
                "{n} values, {buckets} buckets"
            );
        }
        let even: Vec<u64> = values[1..].to_vec();
        assert_eq!(median_in(&even, 6553).0, sorted_median(&even));
    }
}

/// The median, and the passes it took with selections of `buckets` buckets, each selection
/// pass split over `copies` copies of the distribution taken as the pass begins (as the
/// report's threads take them), their counts added as it ends.
fn median_in_copies(values: &[u64], buckets: u128, copies: usize) -> (u64, usize) {
    let mut d = Dist::default();
    values.iter().for_each(|&v| d.add(v));
    let mut passes = 1;
    while d.end_pass_with(buckets) {
        passes += 1;
        let mut each: Vec<Dist> = (0..copies).map(|_| d.clone()).collect();
        for (i, &v) in values.iter().enumerate() {
            each[i % copies].select(v);
        }
        each.iter().for_each(|c| d.add_selected(c));
    }
    (d.median(), passes)
}

#[test]
fn a_range_of_few_values_is_settled_by_one_pass_however_wide() {
    // 600 distinct values in the histogram bucket 2^30..2^30 + 2^26: counted in 1024 buckets
    // they took three selection passes (2^26, 2^16, then 64 values a bucket); kept, one.
    let wide: Vec<u64> = (0..600u64).map(|i| (1 << 30) + i * 100_003).collect();
    let want = sorted_median(&wide);
    assert_eq!(median_of(&wide), (want, 2));
    assert_eq!(median_in_copies(&wide, SELECT_BUCKETS, 3), (want, 2));
    let odd = &wide[1..];
    assert_eq!(
        median_in_copies(odd, SELECT_BUCKETS, 2),
        (sorted_median(odd), 2)
    );
}

#[test]
fn few_distinct_values_in_a_range_settle_it_in_one_pass() {
    // 6000 values of 150 distinct ones in the bucket 2^20..2^20 + 2^16, and 150 far above
    // (more than 256 distinct in all: the histogram). More values than a pass's 4096 buckets
    // (a pass the launch-time fold gives many): counted, 16 values a bucket, and exactly
    // while few, which settles the median in the first selection pass (the buckets alone, two).
    let near = |j: u64| (1 << 20) + (j * 7 % 150) * 401;
    let values: Vec<u64> = (0..6000u64)
        .map(near)
        .chain((0..150u64).map(|i| 1_000_000_000 + i))
        .collect();
    let want = sorted_median(&values);
    assert_eq!(median_in(&values, 4096), (want, 2));
    assert_eq!(median_in_copies(&values, 4096, 2), (want, 2));
    // 1024 buckets are too few to carry exact counts beside them: the buckets narrow the range
    // (64 values a bucket), then its values are kept.
    assert_eq!(median_of(&values), (want, 3));
    // 400 distinct values in the range: too many to count exactly; the buckets narrow it.
    let many: Vec<u64> = (0..6000u64)
        .map(|j| (1 << 20) + (j * 7 % 400) * 150)
        .collect();
    let want = sorted_median(&many);
    assert_eq!(median_in(&many, 4096), (want, 3));
    assert_eq!(median_in_copies(&many, 4096, 3), (want, 3));
    // Two copies that saw 200 distinct values each, 400 together: their sum is not exact.
    let split: Vec<u64> = (0..6000u64)
        .map(|j| (1 << 20) + (j % 2) * 30_000 + (j / 2 % 200) * 150)
        .collect();
    let want = sorted_median(&split);
    assert_eq!(median_in_copies(&split, 4096, 2), (want, 3));
}
