use super::*;
use crate::profiler::{data_init, data_range, data_size, read_data};

fn cfg(img: &mut [u8], user_range: bool, passes: usize, max_per_pass: usize) -> Config {
    Config {
        passes,
        image: img.as_mut_ptr() as usize,
        image_size: img.len(),
        user_range,
        application: false,
        max_per_pass,
        target_level: 1,
    }
}

fn image(max_ranges: usize) -> Vec<u8> {
    let m = vec!["gpu__time_duration.sum".to_string()];
    let mut img = vec![0; data_size(&m, max_ranges)];
    data_init(&mut img, &m, max_ranges);
    img
}

#[test]
fn auto_range_kernel_replay() {
    let mut img = image(2);
    let mut o = Object::default();
    assert_eq!(o.start(), CUPTI_ERROR_INVALID_OPERATION);
    o.set_config(cfg(&mut img, false, 3, 8), 0);
    o.launch(b"before", 10);
    assert_eq!(o.push(b"x"), CUPTI_ERROR_INVALID_OPERATION);
    assert_eq!(o.start(), CUPTI_SUCCESS);
    assert_eq!(o.start(), CUPTI_ERROR_INVALID_OPERATION);
    assert_eq!(o.push(b"x"), CUPTI_ERROR_INVALID_OPERATION);
    assert_eq!(o.decode(), Err(CUPTI_ERROR_INVALID_OPERATION));
    for (k, ns) in [(&b"a"[..], 100), (b"b", 200), (b"c", 300)] {
        o.launch(k, ns);
    }
    assert_eq!(o.stop(), Ok((0, 1, 1)));
    assert_eq!(o.stop(), Err(CUPTI_ERROR_INVALID_OPERATION));
    o.launch(b"after", 10);
    // Three ranges, an image with room for two: one dropped at decode.
    assert_eq!(o.decode(), Ok(1));
    assert_eq!(read_data(&img).map(|d| d.1), Some(2));
    let r = data_range(&img, 1).unwrap();
    assert_eq!(r.name, b"1");
    assert_eq!(r.subject, b"b");
    assert_eq!((r.duration_ns, r.passes, r.launches), (200, 3, 1));
}

#[test]
fn max_ranges_per_pass_drops_and_names_follow_launch_order() {
    let mut img = image(8);
    let mut o = Object::default();
    o.set_config(cfg(&mut img, false, 1, 2), 0);
    o.start();
    for k in [b"a", b"b", b"c", b"d"] {
        o.launch(k, 1);
    }
    o.stop().unwrap();
    assert_eq!(o.decode(), Ok(2));
    assert_eq!(o.decode(), Ok(0));
    // A new session names from 0 again; ranges append to the image.
    o.set_config(cfg(&mut img, false, 1, 2), 0);
    o.start();
    o.launch(b"e", 1);
    o.stop().unwrap();
    assert_eq!(o.decode(), Ok(0));
    let names: Vec<Vec<u8>> = (0..3).map(|i| data_range(&img, i).unwrap().name).collect();
    assert_eq!(names, [b"0".to_vec(), b"1".to_vec(), b"0".to_vec()]);
}

#[test]
fn user_range_user_replay() {
    let mut img = image(4);
    let mut o = Object::default();
    o.set_config(cfg(&mut img, true, 2, 4), 0);
    let mut all = 0;
    let mut pass = 0;
    while all == 0 {
        o.start();
        assert_eq!(o.pop(), CUPTI_ERROR_INVALID_OPERATION);
        o.push(b"outer");
        o.launch(b"k1", 10);
        o.push(b"inner");
        o.launch(b"k2", 5);
        assert_eq!(o.pop(), CUPTI_SUCCESS);
        assert_eq!(o.pop(), CUPTI_SUCCESS);
        (pass, _, all) = o.stop().unwrap();
    }
    assert_eq!(pass, 1);
    assert_eq!(o.decode(), Ok(0));
    let inner = data_range(&img, 0).unwrap();
    assert_eq!(
        profiler::display_name(&inner.name, b"/"),
        b"outer/inner".to_vec()
    );
    assert_eq!((inner.duration_ns, inner.passes, inner.launches), (5, 2, 1));
    let outer = data_range(&img, 1).unwrap();
    assert_eq!(
        (outer.duration_ns, outer.passes, outer.launches),
        (15, 2, 2)
    );
    assert_eq!(outer.subject, b"outer");
}

/// Application replay: each process (here, each object on a copy of the image, as a later
/// process loads it) collects one pass; a session per range; later passes add to the image's
/// ranges in order.
#[test]
fn user_range_application_replay_across_processes() {
    let mut img = image(4);
    let passes = 3;
    for pass in 0..passes {
        let mut o = Object::default();
        let mut saved = img.clone();
        for (name, ns) in [(&b"a"[..], 10), (b"b", 20)] {
            let c = Config {
                application: true,
                ..cfg(&mut saved, true, passes, 4)
            };
            o.set_config(c, pass);
            assert_eq!(o.start(), CUPTI_SUCCESS);
            o.push(name);
            o.launch(b"k", ns);
            assert_eq!(o.pop(), CUPTI_SUCCESS);
            // The pass does not advance at Stop; the last pass says all are submitted.
            assert_eq!(o.stop(), Ok((pass, 1, u8::from(pass == passes - 1))));
            assert_eq!(o.decode(), Ok(0));
        }
        // A range more than the first process made finds no range awaiting this pass.
        if pass > 0 {
            let c = Config {
                application: true,
                ..cfg(&mut saved, true, passes, 4)
            };
            o.set_config(c, pass);
            o.start();
            o.push(b"c");
            o.pop();
            o.stop().unwrap();
            assert_eq!(o.decode(), Ok(1));
        }
        img = saved;
    }
    assert_eq!(read_data(&img).map(|d| d.1), Some(2));
    let a = data_range(&img, 0).unwrap();
    let b = data_range(&img, 1).unwrap();
    assert_eq!(
        (a.name.as_slice(), a.duration_ns, a.passes, a.launches),
        (&b"a"[..], 10, 3, 1)
    );
    assert_eq!(
        (b.name.as_slice(), b.duration_ns, b.passes, b.launches),
        (&b"b"[..], 20, 3, 1)
    );
}

#[test]
fn handles() {
    let mut p = Profiling::new();
    let h = p.new_host();
    assert!(p.host(h).is_ok());
    p.host(h).unwrap().spoiled = true;
    assert_eq!(p.host(h).err(), Some(CUPTI_ERROR_UNKNOWN));
    assert_eq!(
        p.host(std::ptr::null_mut()).err(),
        Some(CUPTI_ERROR_INVALID_PARAMETER)
    );
    assert!(p.drop_host(h));
    assert!(!p.drop_host(h));
    assert_eq!(
        p.object(object_handle(3)).err(),
        Some(CUPTI_ERROR_INVALID_OPERATION)
    );
    p.objects.insert(3, Object::default());
    assert!(p.object(object_handle(3)).is_ok());
    assert_eq!(Profiling::object_ctx(object_handle(3)), Some(3));
    p.context_destroyed(3);
    assert!(p.object(object_handle(3)).is_err());
}
