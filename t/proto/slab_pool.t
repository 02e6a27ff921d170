#!/usr/bin/perl
# t/proto/slab_pool.t: a class left with pages' worth of free chunks
# (here after deleting every other item) gives pages to the global page
# pool on its own once it went slab_automove_window seconds without
# evicting or growing; the live items of those pages move into free chunks
# of its other pages (slab_reassign_rescues), and total_malloced keeps
# counting the pooled pages, as memcached's automove and accounting do.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep);
use MCTest;

my $srv = start_server('-m', '64', '-o', 'slab_automove_window=3');
my $s = $srv->connect;
my $value = 'p' x 1000;
my $count = 20000;
mc_send($s, join('', map { "set item$_ 0 0 1000 noreply\r\n$value\r\n" } 1 .. $count));
mc_is($s, "mn\r\n", "MN\r\n", "$count values of 1000 bytes stored");
my $before = mc_stats($s, 'slabs')->{total_malloced};
cmp_ok($before, '>=', 16 * 1024 * 1024, "they take pages ($before bytes)");
is(mc_stats($s)->{slab_global_page_pool}, 0, 'the pool is empty');

mc_send($s, join('', map { "delete item$_ noreply\r\n" } grep { $_ % 2 == 0 } 1 .. $count));
mc_is($s, "mn\r\n", "MN\r\n", 'every other item deleted');

my $st;
for (1 .. 200) {    # bounded: 20 s
    $st = mc_stats($s);
    last if $st->{slab_global_page_pool} >= 3 && !$st->{slab_reassign_running};
    sleep 0.1;
}
cmp_ok($st->{slab_global_page_pool}, '>=', 3, "pages went to the pool ($st->{slab_global_page_pool})");
cmp_ok($st->{slab_reassign_rescues}, '>', 0, "their live items were rescued ($st->{slab_reassign_rescues})");
is($st->{slab_reassign_evictions_nomem}, 0, 'none was evicted');
is(mc_stats($s, 'slabs')->{total_malloced}, $before, 'total_malloced still counts the pooled pages');

my ($missing, $bad) = mc_count_values($s, $value, map { "item$_" } grep { $_ % 2 == 1 } 1 .. $count);
is($missing, 0, 'every item kept is still there');
is($bad, 0, 'with its value intact');
close $s;
done_testing();
