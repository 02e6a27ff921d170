#!/usr/bin/perl
# t/proto/slab_rescue.t: a slab page moved out of its class ("slabs
# reassign CLS 0") keeps its live items when the class has free chunks on
# other pages: they are moved there (slab_reassign_rescues) instead of
# being evicted (slab_reassign_evictions_nomem).
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep);
use MCTest;

my $srv = start_server('-m', '64');
my $s = $srv->connect;
my $value = 'r' x 1000;
my $count = 2500;
mc_send($s, join('', map { "set item$_ 0 0 1000 noreply\r\n$value\r\n" } 1 .. $count));
mc_is($s, "mn\r\n", "MN\r\n", "$count values of 1000 bytes stored");

my $slabs = mc_stats($s, 'slabs');
my ($cls) = grep { /^(\d+):total_pages$/ && $slabs->{$_} >= 3 } keys %$slabs;
($cls) = $cls =~ /^(\d+)/ if defined $cls;
ok(defined $cls, 'their class holds three pages or more') or diag(explain($slabs));
$cls //= 1;
my $pages = $slabs->{"$cls:total_pages"};

# every other item deleted: each page keeps about half its chunks in use
mc_send($s, join('', map { "delete item$_ noreply\r\n" } grep { $_ % 2 == 0 } 1 .. $count));
mc_is($s, "mn\r\n", "MN\r\n", 'half of them deleted');

mc_send($s, "slabs reassign $cls 0\r\n");
is(mc_line($s), "OK\r\n", "slabs reassign $cls 0 (to the global page pool)");
my $st;
for (1 .. 100) {    # the page moves in the background
    $st = mc_stats($s);
    last if $st->{slabs_moved} > 0 && !$st->{slab_reassign_running};
    sleep 0.05;
}
is($st->{slabs_moved}, 1, 'one page moved');
cmp_ok($st->{slab_reassign_rescues}, '>', 0, "live items in it were rescued ($st->{slab_reassign_rescues})");
is($st->{slab_reassign_evictions_nomem}, 0, 'none was evicted');
is(mc_stats($s, 'slabs')->{"$cls:total_pages"}, $pages - 1, 'the class gave up the page');

my ($missing, $bad) = mc_count_values($s, $value, map { "item$_" } grep { $_ % 2 == 1 } 1 .. $count);
is($missing, 0, 'every item kept is still there');
is($bad, 0, 'with its value intact');
is(mc_stats($s)->{curr_items}, $count / 2, 'curr_items counts them once');
mc_is($s, "set after 0 0 2\r\nok\r\nget after\r\n", "STORED\r\nVALUE after 0 2\r\nok\r\nEND\r\n",
    'the class stores again');
close $s;
$srv->stop;
done_testing();
