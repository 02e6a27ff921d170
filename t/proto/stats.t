#!/usr/bin/perl
# t/proto/stats.t: "stats" and its groups (settings, items, slabs, sizes,
# conns, reset): the well-known names exist, values have the documented
# shape, counters move with the commands, settings reflect the flags.
use strict;
use warnings;
use Test::More;
use MCTest;

my $srv = start_server('-m', '32', '-c', '100', '-t', '3', '-I', '2m');
my $s = $srv->connect;

mc_send($s, "stats\r\n");
my $text = mc_until($s, "END\r\n");
like($text, qr/\A(STAT \S+ [^\r\n]*\r\n)+END\r\n\z/, 'stats is STAT <name> <value> lines then END');
my $st = mc_stats($s);
# The names of protocol.txt's general-purpose statistics table that
# memcached 1.6 reports (its table also lists idle_kicks, which 1.6 does not).
my @names = qw(pid uptime time version pointer_size rusage_user rusage_system
  curr_items total_items bytes max_connections curr_connections total_connections
  rejected_connections connection_structures reserved_fds cmd_get cmd_set cmd_flush
  cmd_touch get_hits get_misses get_expired get_flushed delete_misses delete_hits
  incr_misses incr_hits decr_misses decr_hits cas_misses cas_hits cas_badval
  touch_hits touch_misses auth_cmds auth_errors evictions reclaimed bytes_read
  bytes_written limit_maxbytes accepting_conns listen_disabled_num
  time_in_listen_disabled_us threads conn_yields hash_power_level hash_bytes
  hash_is_expanding expired_unfetched evicted_unfetched evicted_active
  slab_reassign_running slabs_moved crawler_reclaimed crawler_items_checked
  lrutail_reflocked moves_to_cold moves_to_warm moves_within_lru direct_reclaims
  lru_crawler_starts lru_maintainer_juggles slab_global_page_pool
  slab_reassign_rescues slab_reassign_evictions_nomem slab_reassign_chunk_rescues
  slab_reassign_inline_reclaim slab_reassign_busy_items slab_reassign_busy_deletes
  log_worker_dropped log_worker_written log_watcher_skipped log_watcher_sent);
ok(exists $st->{$_}, "stats has $_") for @names;
for my $n (grep { $_ ne 'version' && $_ !~ /^rusage/ } @names) {
    like($st->{$n} // '', qr/^\d+$/, "$n is an unsigned integer") if exists $st->{$n};
}
like($st->{rusage_user} // '', qr/^\d+[.:]\d+$/, 'rusage_user is seconds.microseconds');
is($st->{pid}, $srv->pid, 'pid is the server process');
is($st->{limit_maxbytes}, 32 * 1024 * 1024, 'limit_maxbytes follows -m');
is($st->{threads}, 3, 'threads follows -t');
is($st->{max_connections}, 100, 'max_connections follows -c');
ok($st->{curr_connections} >= 1, 'curr_connections counts this connection');
ok(abs($st->{time} - time) <= 3, 'time is the unix time');
ok($st->{uptime} < 60, 'uptime is seconds since start');
is($st->{curr_items}, 0, 'no items at start');

# Counters move.
my $before = mc_stats($s);
mc_is($s, "set a 0 0 5\r\nhello\r\nset b 0 0 3\r\nbye\r\n", "STORED\r\nSTORED\r\n", 'two sets');
mc_is($s, "get a b c\r\n", "VALUE a 0 5\r\nhello\r\nVALUE b 0 3\r\nbye\r\nEND\r\n", 'get two hits and a miss');
mc_is($s, "get zz\r\n", "END\r\n", 'get a miss');
my $after = mc_stats($s);
is($after->{cmd_set} - $before->{cmd_set}, 2, 'cmd_set moved by 2');
is($after->{cmd_get} - $before->{cmd_get}, 4, 'cmd_get counts keys (4)');
is($after->{get_hits} - $before->{get_hits}, 2, 'get_hits moved by 2');
is($after->{get_misses} - $before->{get_misses}, 2, 'get_misses moved by 2');
is($after->{curr_items}, 2, 'curr_items is 2');
is($after->{total_items} - $before->{total_items}, 2, 'total_items moved by 2');
ok($after->{bytes} > $before->{bytes}, 'bytes grew');

# Which counters a touching get moves, as memcached counts them: gat and
# gats count touches only; mg with T counts a hit as a touch and a miss as
# a get.
for my $case (["gat 10 a\r\n", { cmd_touch => 1, touch_hits => 1 }],
    ["gats 10 a zz\r\n", { cmd_touch => 2, touch_hits => 1, touch_misses => 1 }],
    ["mg a T10\r\n", { cmd_touch => 1, touch_hits => 1 }],
    ["mg zz T10\r\n", { cmd_get => 1, get_misses => 1 }])
{
    my ($cmd, $moved) = @$case;
    my $b = mc_stats($s);
    mc_send($s, $cmd);
    mc_until($s, $cmd =~ /^mg/ ? "\r\n" : "END\r\n");
    my $a = mc_stats($s);
    my %got = map { my $d = $a->{$_} - $b->{$_}; $d ? ($_ => $d) : () }
      qw(cmd_get get_hits get_misses cmd_touch touch_hits touch_misses);
    is(join(' ', map {"$_=$got{$_}"} sort keys %got), join(' ', map {"$_=$moved->{$_}"} sort keys %$moved),
        ($cmd =~ s/\r\n$//r) . ': the counters memcached moves');
}
ok($after->{bytes_read} > $before->{bytes_read}, 'bytes_read grew');
ok($after->{bytes_written} > $before->{bytes_written}, 'bytes_written grew');
mc_is($s, "delete a\r\n", "DELETED\r\n", 'delete one');
my $del = mc_stats($s);
is($del->{curr_items}, 1, 'curr_items drops on delete');
ok($del->{bytes} < $after->{bytes}, 'bytes drops on delete');
is($del->{total_items}, $after->{total_items}, 'total_items does not drop');

# Connections
my $c1 = $srv->connect;
my $c2 = $srv->connect;
mc_is($c1, "version\r\n", mc_version($s), 'second connection works');
mc_is($c2, "version\r\n", mc_version($s), 'third connection works');
my $conn = mc_stats($s);
is($conn->{curr_connections} - $del->{curr_connections}, 2, 'curr_connections counts two new connections');
is($conn->{total_connections} - $del->{total_connections}, 2, 'total_connections counts two new connections');
close $c1;
close $c2;
my $closed;
for (1 .. 50) {
    $closed = mc_stats($s);
    last if $closed->{curr_connections} == $del->{curr_connections};
    select(undef, undef, undef, 0.05);
}
is($closed->{curr_connections}, $del->{curr_connections}, 'curr_connections drops when they close');

# settings
my $set = mc_stats($s, 'settings');
is($set->{maxbytes}, 32 * 1024 * 1024, 'settings maxbytes follows -m');
is($set->{maxconns}, 100, 'settings maxconns follows -c');
is($set->{tcpport}, $srv->port, 'settings tcpport is the port');
is($set->{udpport}, 0, 'settings udpport follows -U 0');
is($set->{num_threads}, 3, 'settings num_threads follows -t');
is($set->{item_size_max}, 2 * 1024 * 1024, 'settings item_size_max follows -I 2m');
is($set->{cas_enabled}, 'yes', 'settings cas_enabled');
is($set->{evictions}, 'on', 'settings evictions on without -M');
if (target() eq 'ours') {
    # "version" answers memcached's version; this line says what we are
    like($set->{memcached_rdma_version}, qr/^\d+\.\d+\.\d+$/,
        'settings memcached_rdma_version (ours only)');
}
# protocol.txt's settings table, as memcached 1.6 reports it (idle_time is
# idle_timeout there; drop_privileges only exists on some builds).
ok(exists $set->{$_}, "settings has $_") for qw(maxbytes maxconns tcpport udpport inter
  verbosity oldest evictions domain_socket umask growth_factor chunk_size num_threads
  stat_key_prefix detail_enabled reqs_per_event cas_enabled tcp_backlog auth_enabled_sasl
  item_size_max maxconns_fast hashpower_init slab_reassign slab_automove
  slab_automove_ratio slab_automove_window slab_chunk_max hash_algorithm lru_crawler
  lru_crawler_sleep lru_crawler_tocrawl lru_maintainer_thread hot_lru_pct warm_lru_pct
  hot_max_factor warm_max_factor temp_lru temporary_ttl idle_timeout watcher_logbuf_size
  worker_logbuf_size track_sizes inline_ascii_response);
# the external storage settings an extstore build (Debian's) reports, defaults
my %ext_defaults = (ext_item_size => 512, ext_item_age => 4294967295, ext_low_ttl => 0,
    ext_recache_rate => 2000, ext_wbuf_size => 4194304, ext_compact_under => 0,
    ext_drop_under => 0, ext_max_sleep => 1000000, ext_max_frag => '0.80',
    slab_automove_freeratio => '0.010', ext_drop_unread => 'no');
is($set->{$_}, $ext_defaults{$_}, "settings $_ default") for sort keys %ext_defaults;
# ... and two that every memcached 1.6.18 build reports, unset without -N / -e
is($set->{$_}, '(null)', "settings $_ (null)") for qw(num_napi_ids memory_file);

# items, slabs
my $items = mc_stats($s, 'items');
ok((grep { /^items:\d+:number$/ } keys %$items), 'stats items has items:<class>:number');
my $total = 0;
$total += $items->{$_} for grep { /^items:\d+:number$/ } keys %$items;
is($total, 1, 'stats items numbers add up to curr_items');
my ($class) = map { /^items:(\d+):number$/ ? $1 : () } sort keys %$items;
$class //= 'none';
# protocol.txt's item statistics, as memcached 1.6 reports them (number_temp
# only appears with a TEMP LRU).
ok(exists $items->{"items:$class:$_"}, "stats items has items:<class>:$_") for qw(number
  number_hot number_warm number_cold age_hot age_warm age mem_requested evicted
  evicted_nonzero evicted_time outofmemory tailrepairs reclaimed expired_unfetched
  evicted_unfetched evicted_active crawler_reclaimed lrutail_reflocked moves_to_cold
  moves_to_warm moves_within_lru direct_reclaims hits_to_hot hits_to_warm hits_to_cold
  hits_to_temp);
my $slabs = mc_stats($s, 'slabs');
ok(exists $slabs->{active_slabs}, 'stats slabs has active_slabs');
ok(exists $slabs->{total_malloced}, 'stats slabs has total_malloced');
ok((grep { /^\d+:chunk_size$/ } keys %$slabs), 'stats slabs has <class>:chunk_size');
ok((grep { /^\d+:used_chunks$/ } keys %$slabs), 'stats slabs has <class>:used_chunks');

mc_send($s, "stats sizes\r\n");
like(mc_until($s, "END\r\n"), qr/\A(STAT \S+ \S+\r\n)*END\r\n\z/, 'stats sizes has the STAT list shape');
mc_send($s, "stats conns\r\n");
my $conns = mc_until($s, "END\r\n");
like($conns, qr/\A(STAT \d+:\S+ [^\r\n]*\r\n)+END\r\n\z/, 'stats conns is STAT <fd>:<name> lines');
like($conns, qr/^STAT \d+:addr \S+\r\n/m, 'stats conns shows addr');
like($conns, qr/^STAT \d+:state conn_\w+\r\n/m, 'stats conns shows state');

# reset
mc_is($s, "stats reset\r\n", "RESET\r\n", 'stats reset');
my $reset = mc_stats($s);
is($reset->{get_hits}, 0, 'get_hits is 0 after reset');
is($reset->{cmd_set}, 0, 'cmd_set is 0 after reset');
is($reset->{curr_items}, 1, 'curr_items survives reset');

close $s;
$srv->stop;
done_testing;

sub mc_version {
    my $sock = shift;
    mc_send($sock, "version\r\n");
    return mc_line($sock);
}
