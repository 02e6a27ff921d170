#!/usr/bin/perl
# t/proto/slab_chunk_rescue.t: a slab page holding value chunks of large
# (chunked) items can be emptied: each live chunk is copied into a free
# chunk of its class on another page and the owning item's chunk table
# points at the copy (slab_reassign_chunk_rescues), so every value stays
# whole; with no free chunk left the owner is evicted
# (slab_reassign_evictions_nomem), as in memcached.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep);
use MCTest;

my $srv = start_server('-m', '64', '-o', 'slab_chunk_max=4096');
my $s = $srv->connect;
my $count = 2000;
# each value its own bytes, so a chunk copied to the wrong item shows
sub value_of { substr(sprintf("%07d", $_[0]) x 1572, 0, 11000) }
mc_send($s, join('', map { "set big$_ 0 0 11000 noreply\r\n" . value_of($_) . "\r\n" } 1 .. $count));
mc_is($s, "mn\r\n", "MN\r\n", "$count values of 11000 bytes stored");

my $slabs = mc_stats($s, 'slabs');
my ($cls) = map { /^(\d+):chunk_size$/ ? $1 : () } grep { $slabs->{$_} == 4096 } keys %$slabs;
ok(defined $cls, 'a class of 4096-byte chunks holds their values') or diag(explain($slabs));
$cls //= 1;
my $pages = $slabs->{"$cls:total_pages"};
cmp_ok($pages, '>=', 3, "it holds $pages pages");

mc_send($s, join('', map { "delete big$_ noreply\r\n" } grep { $_ % 2 == 0 } 1 .. $count));
mc_is($s, "mn\r\n", "MN\r\n", 'every other one deleted');

mc_send($s, "slabs reassign $cls 0\r\n");
is(mc_line($s), "OK\r\n", "slabs reassign $cls 0 (a page of value chunks to the pool)");
my $st;
for (1 .. 100) {    # bounded: 5 s
    $st = mc_stats($s);
    last if $st->{slabs_moved} > 0 && !$st->{slab_reassign_running};
    sleep 0.05;
}
is($st->{slabs_moved}, 1, 'the page moved');
cmp_ok($st->{slab_reassign_chunk_rescues}, '>', 0,
    "value chunks in it were rescued ($st->{slab_reassign_chunk_rescues})");
is($st->{slab_reassign_evictions_nomem}, 0, 'no item was lost');

my ($missing, $bad) = (0, 0);
for my $i (grep { $_ % 2 == 1 } 1 .. $count) {
    my ($m, $b) = mc_count_values($s, value_of($i), "big$i");
    $missing += $m;
    $bad += $b;
}
is($missing, 0, 'every item kept is still there');
is($bad, 0, 'with its whole value intact');
is(mc_stats($s)->{curr_items}, $count / 2, 'curr_items counts them once');
close $s;
done_testing();
