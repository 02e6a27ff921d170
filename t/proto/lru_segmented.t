#!/usr/bin/perl
# t/proto/lru_segmented.t: the segmented LRU as memcached 1.6 runs it by
# default: the LRU maintainer's settings and stats, the "lru tune|mode|
# temp_ttl" commands with their replies and effects, items entering HOT
# (or TEMP), moving to COLD and back to WARM when read, and the flat mode
# of -o no_lru_maintainer.
use strict;
use warnings;
use Test::More;
use MCTest;

sub wait_for {
    my ($what, $secs) = @_;
    my $until = time + $secs;
    while (time < $until) {
        return 1 if $what->();
        select(undef, undef, undef, 0.1);
    }
    return $what->();
}

# ---- defaults -----------------------------------------------------------------
my $srv = start_server('-m', '64');
my $s = $srv->connect;
my $set = mc_stats($s, 'settings');
is($set->{lru_maintainer_thread}, 'yes', 'the LRU maintainer runs by default');
is($set->{lru_segmented}, 'yes', 'the LRU is segmented by default');
is($set->{hot_lru_pct}, 20, 'hot_lru_pct 20');
is($set->{warm_lru_pct}, 40, 'warm_lru_pct 40');
is($set->{hot_max_factor}, '0.20', 'hot_max_factor 0.20');
is($set->{warm_max_factor}, '2.00', 'warm_max_factor 2.00');
is($set->{temp_lru}, 'no', 'temp_lru no');
is($set->{temporary_ttl}, 61, 'temporary_ttl 61');
my $st = mc_stats($s);
for my $name (qw(lru_maintainer_juggles evicted_active moves_to_cold moves_to_warm
                 moves_within_lru direct_reclaims lru_bumps_dropped)) {
    ok(defined $st->{$name}, "stats has $name");
}
ok(wait_for(sub { mc_stats($s)->{lru_maintainer_juggles} > $st->{lru_maintainer_juggles} }, 5),
   'lru_maintainer_juggles grows');

# ---- items flow HOT -> COLD, and back to WARM when read twice ---------------
my $val = 'v' x 1000;
mc_is($s, "set first 0 0 1000\r\n$val\r\n", "STORED\r\n", 'set first');
my $items = mc_stats($s, 'items');
my ($cls) = map { /^items:(\d+):number$/ ? $1 : () } keys %$items;
ok($cls, 'stats items names the class');
for my $name (qw(number number_hot number_warm number_cold age_hot age_warm age
                 moves_to_cold moves_to_warm moves_within_lru direct_reclaims
                 hits_to_hot hits_to_warm hits_to_cold hits_to_temp evicted_active)) {
    ok(defined $items->{"items:$cls:$name"}, "stats items has $name");
}
ok(!defined $items->{"items:$cls:number_temp"}, 'no number_temp while temp_lru is off');
for my $i (1 .. 50) {
    mc_send($s, "set k$i 0 0 1000 noreply\r\n$val\r\n");
}
ok(wait_for(sub { mc_stats($s, 'items')->{"items:$cls:moves_to_cold"} > 0 }, 5),
   'the maintainer moves items beyond HOT\'s share to COLD');
$items = mc_stats($s, 'items');
ok($items->{"items:$cls:number_cold"} > 0, 'COLD holds items');
is($items->{"items:$cls:number_hot"} + $items->{"items:$cls:number_warm"}
     + $items->{"items:$cls:number_cold"}, $items->{"items:$cls:number"},
   'the segments add up to number');
cmp_ok($items->{"items:$cls:number_hot"}, '<', 51, 'HOT keeps only part of the class');

# "first" is the oldest: in COLD by now. Two reads make it active; the
# maintainer then moves it to WARM.
mc_is($s, "get first\r\n", "VALUE first 0 1000\r\n$val\r\nEND\r\n", 'get first (fetched)');
mc_is($s, "get first\r\n", "VALUE first 0 1000\r\n$val\r\nEND\r\n", 'get first (active)');
$items = mc_stats($s, 'items');
cmp_ok($items->{"items:$cls:hits_to_cold"}, '>=', 1, 'hits_to_cold counts reads of COLD items');
ok(wait_for(sub { mc_stats($s, 'items')->{"items:$cls:moves_to_warm"} > 0 }, 5),
   'an active COLD item moves to WARM');
ok(mc_stats($s, 'items')->{"items:$cls:number_warm"} >= 1, 'WARM holds it');
ok(mc_stats($s)->{moves_to_warm} >= 1, 'stats totals moves_to_warm');

# ---- the access time follows memcached's bumps --------------------------------
# The first fetch only marks an item fetched; the next makes it active and
# moves its access time (a COLD item's through the maintainer's queue).
mc_is($s, "set idle 0 0 1\r\nx\r\n", "STORED\r\n", 'set idle');
sleep 2.2;
my @l;
for (1 .. 2) {
    mc_send($s, "mg idle l\r\n");
    push @l, mc_line($s) =~ /^HD l(\d+)\r\n\z/ ? $1 : -1;
}
ok(!grep({ $_ < 1 || $_ > 4 } @l), "two fetches report the idle time before them (@l)");
ok(wait_for(sub { mc_send($s, "mg idle l\r\n"); mc_line($s) eq "HD l0\r\n" }, 3),
   'the second fetch moved the access time');

# ---- lru tune ------------------------------------------------------------------
mc_is($s, "lru tune 10 30 0.1 1.5\r\n", "OK\r\n", 'lru tune');
$set = mc_stats($s, 'settings');
is_deeply([@$set{qw(hot_lru_pct warm_lru_pct hot_max_factor warm_max_factor)}],
          [10, 30, '0.10', '1.50'], 'lru tune shows in stats settings');
mc_is($s, "lru tune 50 40 0.1 1\r\n", "ERROR hot and warm pcts must not exceed 80\r\n",
      'lru tune: shares over 80');
mc_is($s, "lru tune 10 10 0 1\r\n", "ERROR hot/warm age factors must be greater than 0\r\n",
      'lru tune: a zero factor');
mc_is($s, "lru tune 10 x 0.1 1\r\n", "ERROR\r\n", 'lru tune: not a number');
mc_is($s, "lru tune 10 10\r\n", "ERROR\r\n", 'lru tune: too few arguments');
mc_send($s, "lru tune 20 40 0.2 2 noreply\r\n");
ok(mc_silent($s, 0.3), 'lru tune noreply sends nothing');
is(mc_stats($s, 'settings')->{hot_lru_pct}, 20, 'and took effect');

# ---- lru mode ------------------------------------------------------------------
mc_is($s, "lru mode flat\r\n", "OK\r\n", 'lru mode flat');
is(mc_stats($s, 'settings')->{lru_segmented}, 'no', 'lru_segmented no');
ok(wait_for(sub {
       my $i = mc_stats($s, 'items');
       $i->{"items:$cls:number_hot"} == 0 && $i->{"items:$cls:number_warm"} == 0
   }, 5), 'flat: the maintainer drains HOT and WARM into COLD');
mc_is($s, "set flat1 0 0 1000\r\n$val\r\n", "STORED\r\n", 'set in flat mode');
is(mc_stats($s, 'items')->{"items:$cls:number_hot"}, 0, 'flat: new items enter COLD');
mc_is($s, "lru mode segmented\r\n", "OK\r\n", 'lru mode segmented');
is(mc_stats($s, 'settings')->{lru_segmented}, 'yes', 'lru_segmented yes');
mc_is($s, "lru mode bogus\r\n", "ERROR\r\n", 'lru mode: unknown mode');
mc_is($s, "lru mode\r\n", "ERROR\r\n", 'lru mode: no mode');

# ---- lru temp_ttl ----------------------------------------------------------------
mc_is($s, "lru temp_ttl 100\r\n", "OK\r\n", 'lru temp_ttl 100');
$set = mc_stats($s, 'settings');
is("$set->{temp_lru} $set->{temporary_ttl}", 'yes 100', 'temp_lru yes, temporary_ttl 100');
mc_is($s, "set short 0 50 1000\r\n$val\r\n", "STORED\r\n", 'set with a 50 s TTL');
is(mc_stats($s, 'items')->{"items:$cls:number_temp"}, 1, 'a short TTL enters TEMP');
mc_send($s, "stats cachedump $cls 0\r\n");
my $dump = mc_until($s, "END\r\n");
ok($dump =~ /^ITEM k1 /m && $dump !~ /^ITEM short /m,
   'stats cachedump lists the COLD items, not the TEMP one');
mc_is($s, "get short\r\n", "VALUE short 0 1000\r\n$val\r\nEND\r\n", 'get short');
is(mc_stats($s, 'items')->{"items:$cls:hits_to_temp"}, 1, 'hits_to_temp counts it');
mc_is($s, "lru temp_ttl x\r\n", "ERROR\r\n", 'lru temp_ttl: not a number');
mc_is($s, "lru temp_ttl -1\r\n", "OK\r\n", 'lru temp_ttl -1');
is(mc_stats($s, 'settings')->{temp_lru}, 'no', 'temp_lru off again');
mc_is($s, "lru bogus 1\r\n", "ERROR\r\n", 'lru: unknown subcommand');
mc_is($s, "lru\r\n", "ERROR\r\n", 'lru alone');
mc_is($s, "get first\r\n", "VALUE first 0 1000\r\n$val\r\nEND\r\n", 'the connection keeps serving');
close $s;
$srv->stop;

# ---- -o options --------------------------------------------------------------
$srv = start_server('-m', '64', '-o', 'hot_lru_pct=30,warm_lru_pct=30,hot_max_factor=0.5,'
                    . 'warm_max_factor=3,temporary_ttl=20');
$s = $srv->connect;
$set = mc_stats($s, 'settings');
is_deeply([@$set{qw(hot_lru_pct warm_lru_pct hot_max_factor warm_max_factor temp_lru temporary_ttl)}],
          [30, 30, '0.50', '3.00', 'yes', 20], '-o sets the tunables and TEMP');
mc_is($s, "set t 0 10 3\r\nabc\r\n", "STORED\r\n", 'set with a 10 s TTL');
my ($tcls) = map { /^items:(\d+):number_temp$/ ? $1 : () } keys %{ mc_stats($s, 'items') };
is(mc_stats($s, 'items')->{"items:$tcls:number_temp"}, 1, 'it is in TEMP');
close $s;
$srv->stop;

# ---- no_lru_maintainer: memcached's flat LRU ------------------------------------
$srv = start_server('-m', '64', '-o', 'no_lru_maintainer');
$s = $srv->connect;
$set = mc_stats($s, 'settings');
is("$set->{lru_maintainer_thread} $set->{lru_segmented}", 'no no',
   'no_lru_maintainer: no thread, flat LRU');
$st = mc_stats($s);
ok(!defined $st->{lru_maintainer_juggles} && !defined $st->{moves_to_cold},
   'no maintainer figures in stats');
mc_is($s, "set a 0 0 1\r\nx\r\n", "STORED\r\n", 'set');
$items = mc_stats($s, 'items');
ok(!grep(/number_hot|moves_to|hits_to/, keys %$items), 'stats items has no segment figures');
mc_is($s, "lru mode segmented\r\n", "ERROR\r\n", 'lru mode needs the maintainer');
mc_is($s, "lru temp_ttl 10\r\n", "ERROR\r\n", 'lru temp_ttl needs the maintainer');
mc_is($s, "lru tune 10 10 0.1 1\r\n", "OK\r\n", 'lru tune does not');
close $s;
$srv->stop;

my ($exited, $status, $log) = run_briefly(5, '-o', 'hot_lru_pct=50,warm_lru_pct=40');
ok($exited && $status != 0 && $log =~ /cannot be more than 80%/, 'shares over 80% are refused');
($exited, $status, $log) = run_briefly(5, '-o', 'no_lru_maintainer,temporary_ttl=10');
ok($exited && $status != 0 && $log =~ /temporary_ttl requires lru_maintainer/,
   'temporary_ttl needs the maintainer');

done_testing();
