#!/usr/bin/perl
# t/proto/cmdline.t: start-up flags. Unknown flags, unknown -o suboptions and
# invalid values make the server exit non-zero with a message; memcached's
# -o suboptions are accepted; numbers read as memcached 1.6.18 reads them
# (atoi: "-m 100m" is 100 MB); command lines that start memcached start this
# server and the ones memcached refuses are refused; the default listen
# address (ours only).
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use File::Spec;
use File::Temp ();
use MCTest;

for my $case (
    [['--no-such-flag'],          'an unknown long flag'],
    [['-J'],                      'an unknown short flag'],
    [['-o', 'no_such_suboption'], 'an unknown -o suboption'],
    [['-o', 'no_such_suboption=5'], 'an unknown -o suboption with a value'],
    [['-c', '0'],                 '-c 0'],
    [['-t', '0'],                 '-t 0'],
    [['-I', '5'],                 '-I below 1 KiB'],
    [['-I', '2000m'],             '-I above half of -m'],
  )
{
    my ($args, $what) = @$case;
    my ($exited, $status, $log) = run_briefly(5, @$args);
    ok($exited, "$what (@$args): the server exits")
      and ok(($status >> 8) != 0 && !($status & 127), "$what: with a non-zero exit status")
      and like($log, qr/\S/, "$what: and says why");
}

# a port that is taken: memcached exits with EX_OSERR (71)
{
    my $taken = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
        Listen => 1, ReuseAddr => 1) or die "cannot bind: $!";
    my ($exited, $status, $log) = run_briefly(5, '-p', $taken->sockport);
    ok($exited, 'a TCP port already in use: the server exits');
    is($status >> 8, 71, 'with exit status 71 (EX_OSERR)');
    like($log, qr/in use/i, 'and says the address is in use');
}

# -o suboptions that memcached 1.6 accepts must not stop the server.
my @started;
for my $opt (qw(modern no_modern lru_crawler no_lru_crawler lru_maintainer no_lru_maintainer
    maxconns_fast no_maxconns_fast hashpower=18 hash_algorithm=murmur3 slab_reassign
    slab_automove=0 tail_repair_time=30 idle_timeout=60 temporary_ttl=10 track_sizes
    watcher_logbuf_size=256 worker_logbuf_size=64 slab_chunk_max=512 no_hashexpand
    lru_crawler_sleep=100 lru_crawler_tocrawl=0 hot_lru_pct=20 warm_lru_pct=40
    hot_max_factor=0.2 warm_max_factor=2.0 read_buf_mem_limit=0))
{
    push @started, [$opt, scalar eval { start_server('-o', $opt) }, $@];
}
for my $st (@started) {    # started all first, checked and stopped together: faster
    my ($opt, $srv, $err) = @$st;
    ok($srv, "-o $opt is accepted") or diag($err);
    next unless $srv;
    my $s = $srv->connect;
    mc_is($s, "set a 0 0 1\r\nx\r\nget a\r\n", "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n", "-o $opt: server serves");
    close $s;
    kill 'TERM', $srv->pid;
}
for my $st (@started) {
    my ($opt, $srv) = @$st;
    ok($srv->wait_exit(10), "-o $opt: server stops on SIGTERM") if $srv;
}

# Several classic flags together.
{
    my $srv = eval { start_server('-m', '16', '-c', '64', '-t', '2', '-R', '10', '-B', 'ascii',
        '-f', '1.5', '-n', '64', '-b', '128', '-o', 'modern') };
    ok($srv, 'the classic flags -m -c -t -R -B -f -n -b start the server') or diag($@);
    if ($srv) {
        my $s = $srv->connect;
        my $st = mc_stats($s, 'settings');
        is($st->{growth_factor}, '1.50', '-f shows as growth_factor');
        is($st->{chunk_size}, 64, '-n shows as chunk_size');
        is($st->{reqs_per_event}, 10, '-R shows as reqs_per_event');
        is($st->{tcp_backlog}, 128, '-b shows as tcp_backlog');
        close $s;
        $srv->stop;
    }
}

# -I takes bytes or a k/m suffix.
for my $case (['512k', 524288], ['1048576', 1048576], ['2m', 2097152]) {
    my ($arg, $bytes) = @$case;
    my $srv = eval { start_server('-I', $arg) };
    ok($srv, "-I $arg starts the server") or diag($@);
    next unless $srv;
    my $s = $srv->connect;
    is(mc_stats($s, 'settings')->{item_size_max}, $bytes, "-I $arg means $bytes bytes");
    close $s;
    kill 'TERM', $srv->pid;
    ok($srv->wait_exit(10), "-I $arg: server stops on SIGTERM");
}

# -p -1: the server picks a free port; with MEMCACHED_PORT_FILENAME set it
# writes "TCP INET: <port>" there (test harnesses, libmemcached's among them,
# rely on this to avoid port races).
{
    my $srv = eval { start_server({ port_file => 1 }) };
    ok($srv, '-p -1 with MEMCACHED_PORT_FILENAME: the port file names a port that serves') or diag($@);
    if ($srv) {
        my $s = $srv->connect;
        mc_is($s, "set pf 0 0 1\r\nx\r\nget pf\r\n", "STORED\r\nVALUE pf 0 1\r\nx\r\nEND\r\n", '-p -1: the chosen port serves');
        close $s;
        $srv->stop;
    }
}

# -C disables CAS: uniques are 0 and a cas command never stores.
{
    my $srv = start_server('-C');
    my $s = $srv->connect;
    mc_is($s, "set a 0 0 1\r\nx\r\ngets a\r\n", "STORED\r\nVALUE a 0 1 0\r\nx\r\nEND\r\n", '-C: gets shows a cas unique of 0');
    mc_is($s, "cas a 0 0 1 0\r\ny\r\n", "EXISTS\r\n", '-C: cas with the unique gets showed is EXISTS');
    mc_is($s, "cas a 0 0 1 1\r\nz\r\n", "EXISTS\r\n", '-C: cas with any other unique is EXISTS');
    mc_is($s, "cas nokey 0 0 1 0\r\nz\r\n", "NOT_FOUND\r\n", '-C: cas on a missing key is NOT_FOUND');
    mc_is($s, "get a\r\n", "VALUE a 0 1\r\nx\r\nEND\r\n", '-C: the value is unchanged');
    is(mc_stats($s, 'settings')->{cas_enabled}, 'no', '-C: settings cas_enabled is no');
    close $s;
    $srv->stop;
}

# Deliberate difference: without -l, memcached listens on every interface;
# ours listens on 127.0.0.1 only, so a fresh install is not open to the network.
SKIP: {
    skip 'default listen address: memcached-rdma deliberately listens on 127.0.0.1 only (memcached: all interfaces)', 6
      unless target() eq 'ours';
    my $ext = external_address();
    my $srv = start_server({ listen => 0 });
    my $s = $srv->connect;
    mc_is($s, "version\r\n", "VERSION ", 'ours without -l: reachable on 127.0.0.1 (default listen address is loopback)');
    mc_line($s);
    SKIP: {
        skip 'no non-loopback IPv4 address on this host', 1 unless $ext;
        my $o = IO::Socket::INET->new(PeerAddr => $ext, PeerPort => $srv->port, Proto => 'tcp', Timeout => 2);
        ok(!$o, "ours without -l: not reachable on $ext (default listen address is loopback, unlike memcached)");
    }
    close $s;
    $srv->stop;
}

# memcached 1.6.18 reads numeric flags with atoi(): "-m 100m" is 100 MB and
# "-m 1g" is 1 MB (no unit is understood; the suffix is ignored).
for my $case ([['-m', '100m'], 104857600], [['-m', '1g', '-I', '512k'], 1048576],
    [['--memory-limit=100m'], 104857600])
{
    my ($args, $bytes) = @$case;
    my $srv = eval { start_server(@$args) };
    ok($srv, "@$args starts the server") or diag($@);
    next unless $srv;
    my $s = $srv->connect;
    is(mc_stats($s, 'settings')->{maxbytes}, $bytes, "@$args: maxbytes is $bytes (suffix ignored)");
    close $s;
    $srv->stop;
}

# Command lines that start memcached 1.6.18 start this server too and serve.
{
    my @lines = (
        ['-b', '0'], ['-D', 'ab'], ['-o', 'slab_chunk_max=524288'],
        ['-I', '16k', '-o', 'slab_chunk_max=16384'], ['-o', 'no_modern'],
        ['-P', '/nonexistent-dir/memcached.pid'], ['-p', '-1', '-U', '-1'],
        ['-t', '2x'], ['-R', '5x'], ['-c', '64x'], ['-n', '-1'], ['-f', '1.5x'], ['-a', '999'],
        ['-I', '1.5m'], ['-o', 'hot_lru_pct=70,warm_lru_pct=5'], ['-o', 'idle_timeout=abc'],
        ['-o', 'inline_ascii_resp'], ['-o', 'slab_automove=abc'], ['-o', 'modern,'],
        ['-o', 'temporary_ttl=abc'], ['-o', 'hash_algorithm=xxh3'], ['-o', 'ext_page_size=64'],
        ['-o', 'ssl_verify_mode=1'], ['-o', 'slab_sizes=100-200-400'], ['-t', '2', '-o', 'hashpower=12'],
    );
    my @up;
    for my $args (@lines) {
        my @opt = $args->[0] eq '-p' ? ({ port_file => 1 }) : ();    # -p -1: port from the file
        push @up, [$args, scalar eval { start_server(@opt, @$args) }, $@];
    }
    for my $u (@up) {
        my ($args, $srv, $err) = @$u;
        ok($srv, "@$args starts the server, as memcached") or diag($err);
        next unless $srv;
        my $s = $srv->connect;
        mc_is($s, "set a 0 0 1\r\nx\r\nget a\r\n", "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n", "@$args: server serves");
        my $st = mc_stats($s, 'settings');
        if ($args->[0] eq '-b') {
            is($st->{tcp_backlog}, 0, '-b 0 shows as tcp_backlog 0');
        } elsif ($args->[0] eq '-D') {
            is($st->{detail_enabled}, 'yes', '-D ab turns on detail stats');
            mc_is($s, "set fooabar 0 0 1\r\nx\r\nget fooabar\r\n", "STORED\r\nVALUE fooabar 0 1\r\nx\r\nEND\r\n",
                '-D ab: a key holding the delimiter is stored');
            mc_send($s, "stats detail dump\r\n");
            like(mc_until($s, "END\r\n"), qr/^PREFIX foo get 1 hit 1 set 1 del 0\r$/m,
                '-D ab: the first character (a) is the prefix delimiter');
        } elsif ("@$args" eq '-o slab_chunk_max=524288') {
            is($st->{slab_chunk_max}, 524288, 'slab_chunk_max=524288 is bytes');
        } elsif ($args->[0] eq '-I') {
            is($st->{item_size_max}, $args->[1] eq '16k' ? 16384 : 1048576, "@$args: item_size_max");
        } elsif ($args->[0] eq '-o' && $args->[1] eq 'no_modern') {
            is($st->{slab_chunk_max}, 1048576, '-o no_modern: slab_chunk_max is the page size');
        } elsif ($args->[0] eq '-P') {
            like($srv->log_text, qr/pid file/, '-P with a missing directory: logged, the server runs on');
        } elsif ($args->[0] eq '-p') {
            my $pf = $srv->{port_file};
            open my $fh, '<', $pf;
            my @l = $fh ? <$fh> : ();
            ok(@l && !grep({ !/^(TCP|UDP) INET6?: \d+\n\z/ } @l), '-p -1 -U -1: the port file has "TCP INET: <port>" lines')
              or diag(join '', @l);
        }
        close $s;
        kill 'TERM', $srv->pid;
    }
    for my $u (@up) {
        my ($args, $srv) = @$u;
        ok($srv->wait_exit(10), "@$args: server stops on SIGTERM") if $srv;
    }
}

# A writable -P holds the server's pid.
{
    my $pidfile = File::Spec->catfile(File::Spec->tmpdir, "mctest-pid-$$");
    unlink $pidfile;
    my $srv = start_server('-P', $pidfile);
    # memcached may write the file just after it starts listening
    my $line = '';
    for (1 .. 100) {
        if (open my $fh, '<', $pidfile) {
            $line = <$fh> // '';
            last if $line =~ /\n\z/;
        }
        select(undef, undef, undef, 0.05);
    }
    is($line, $srv->pid . "\n", '-P writes the pid');
    $srv->stop;
    unlink $pidfile;
}

# Command lines memcached 1.6.18 refuses are refused here too, with its exit
# status: 64 (EX_USAGE) for what it checks once every flag is read, 1 for a
# bad flag or value, 71 (EX_OSERR) for a port it cannot listen on.
for my $case ([64, '-m', '1'], [64, '-m', '0'], [64, '-I', '100k'], [64, '-I', '1g'],
    [64, '-I', '2000000'], [64, '-o', 'slab_chunk_max=1000'],
    [64, '-o', 'slab_chunk_max=2097152', '-I', '2m'], [64, '-o', 'no_chunked_items', '-I', '512k'],
    [1, '-o', 'tail_repair_time=0'], [1, '-o', 'hash_algorithm=foo'],
    [64, '-o', 'no_lru_maintainer,temporary_ttl=61'], [64, '-o', 'slab_sizes=1000-200'],
    [64, '-o', 'slab_sizes=100-104'], [64, '-o', 'worker_logbuf_size=10'],
    [1, '-o', 'meta_response_old'], [1, '-o', 'proxy_config=x'], [1, '-o', ',modern'],
    [1, '-o', 'modern,,track_sizes'], [1, '-o', 'hashpower=12'], [1, '-o', 'hashpower=11'],
    [64, '-N', '8'], [1, '-o', 'ext_page_size=abc'], [1, '-o', 'ext_path=/tmp/x'],
    [1, '-o', 'ext_path=/nonexistent-dir/x:64m'], [1, '-o', 'ssl_verify_mode=9'],
    [1, '-o', 'read_buf_mem_limit=abc'], [1, '-D', ''], [1, '-c', '0'], [1, '-t', '0'],
    [1, '-f', '1.0'], [1, '-n', '0'], [1, '-R', '0'], [1, '-o', 'hot_lru_pct=90'],
    [1, '-o', 'slab_automove=9'], [64, '-B', 'foo'], [64, '-p', '99999'],
    [71, '-p', '-5'], [71, '-U', '-5'], [1, '-z'])
{
    my ($expect, @args) = @$case;
    my ($exited, $status, $log) = run_briefly(5, @args);
    ok($exited && !($status & 127), "@args: the server exits")
      and is($status >> 8, $expect, "@args: with exit status $expect, as memcached")
      and like($log, qr/\S/, "@args: and says why");
}
# The RDMA transport options (ours only): bad values are refused with a
# reason; good ones start the server (serving TCP where no RDMA device is).
if (target() eq 'ours') {
    for my $case ([qr/rdma_transport must be rc, ud or hybrid/, '-o', 'rdma_transport=tcp'],
        [qr/rdma_rc_max must be 0\.\.1000000/, '-o', 'rdma_rc_max=-1'],
        [qr/rdma_rc_max must be 0\.\.1000000/, '-o', 'rdma_rc_max=x'],
        [qr/rdma_rc_credits must be 4\.\.1024/, '-o', 'rdma_rc_credits=3'],
        [qr/rdma_rc_credits must be 4\.\.1024/, '-o', 'rdma_rc_credits=1025'],
        [qr/rdma_ud_keepalive_ms must be 100\.\.3600000/, '-o', 'rdma_ud_keepalive_ms=5'],
        [qr/rdma_promote_rate must be 0\.\.100000000/, '-o', 'rdma_promote_rate=x'],
        [qr/rdma_demote_rate must be 0\.\.100000000/, '-o', 'rdma_demote_rate=-1'],
        [qr/rdma_move_interval_ms must be 10\.\.3600000/, '-o', 'rdma_move_interval_ms=5'],
        [qr/rdma_ack_timeout must be 0\.\.31/, '-o', 'rdma_ack_timeout=32'],
        [qr/rdma_ack_timeout must be 0\.\.31/, '-o', 'rdma_ack_timeout=-1'],
        [qr/rdma_eager_max must be 1024\.\.1048576 bytes/, '-o', 'rdma_eager_max=1023'],
        [qr/rdma_eager_max must be 1024\.\.1048576 bytes/, '-o', 'rdma_eager_max=8k'],
        [qr/rdma_poll must be event, spin or adaptive/, '-o', 'rdma_poll=busy'],
        [qr/Missing rdma_listen argument/, '-o', 'rdma_listen'],
        [qr/Missing rdma_rc_max argument/, '-o', 'rdma_rc_max'],
        [qr/Illegal suboption "rdma_nonsense=1"/, '-o', 'rdma_nonsense=1'])
    {
        my ($why, @args) = @$case;
        my ($exited, $status, $log) = run_briefly(5, @args);
        ok($exited && !($status & 127) && $status >> 8 == 1, "@args: the server exits with 1")
          and like($log, $why, "@args: and says why");
    }
    # "stats settings" reports every RDMA option: as given, else its default
    my %defaults = (rdma_eager_max => 8192, rdma_rc_max => 0, rdma_rc_credits => 0,
        rdma_ud_keepalive_ms => 30000, rdma_ack_timeout => 0, rdma_promote_rate => 1000,
        rdma_demote_rate => 10, rdma_move_interval_ms => 1000, rdma_poll => 'event',
        rdma_transport => 'hybrid', rdma_listen => 'NULL');
    for my $given ({rdma_transport => 'ud', rdma_rc_max => 4, rdma_ud_keepalive_ms => 25000},
        {rdma_rc_max => 1, rdma_rc_credits => 4, rdma_promote_rate => 5, rdma_demote_rate => 100,
            rdma_move_interval_ms => 200, rdma_ack_timeout => 16, rdma_poll => 'adaptive',
            rdma_eager_max => 65536, rdma_transport => 'rc'})
    {
        my $opts = join ',', map {"$_=$given->{$_}"} sort keys %$given;
        my $srv = eval { start_server('-o', $opts) };
        ok($srv, "$opts: the server starts") or next;
        my $set = mc_stats($srv->connect, 'settings');
        my %want = (%defaults, %$given);
        is($set->{$_}, $want{$_}, "$opts: stats settings $_") for sort keys %want;
        $srv->stop;
    }
}
# The external storage options (-o ext_*), with a file in a fresh directory:
# memcached's messages and exit statuses; good values start the server.
{
    my $dir = File::Temp::tempdir(CLEANUP => 1);
    my $f = "$dir/ext";
    for my $case ([64, qr/cannot be larger than ext_wbuf_size/, '-I', '8m', '-o', "ext_path=$f:64m"],
        [64, qr/Cannot use UDP with extstore/, '-U', '22123', '-o', "ext_path=$f:64m"],
        [1, qr/ext_page_size before any ext_path/, '-o', "ext_path=$f:64m,ext_page_size=8"],
        [1, qr/page_size must be divisible by wbuf_size/, '-o', "ext_wbuf_size=3,ext_path=$f:64m"],
        [1, qr/could not parse argument to ext_threads/, '-o', "ext_path=$f:64m,ext_threads=x"],
        [1, qr/could not parse argument to ext_item_size/, '-o', 'ext_item_size=-1'],
        [1, qr/could not parse argument to ext_max_frag/, '-o', 'ext_max_frag=x'],
        [1, qr/could not parse argument to slab_automove_freeratio/, '-o', 'slab_automove_freeratio=x'],
        [1, qr/Missing ext_max_frag argument/, '-o', 'ext_max_frag'],
        [1, qr/missing argument to ext_path/, '-o', 'ext_path'],
        [1, qr/must supply size to ext_path/, '-o', "ext_path=$f"],
        [1, qr/only presently supports the default bucket/, '-o', "ext_path=$f:64m:compact"])
    {
        my ($expect, $why, @args) = @$case;
        my ($exited, $status, $log) = run_briefly(5, @args);
        ok($exited && !($status & 127), "@args: the server exits")
          and is($status >> 8, $expect, "@args: with exit status $expect, as memcached")
          and like($log, $why, "@args: and says why as memcached");
    }
    my $srv = eval {
        start_server('-o', "ext_page_size=8,ext_wbuf_size=2,ext_path=$f:64m,ext_path=$f.2:16m,"
              . 'ext_item_size=1024,ext_item_age=5,ext_low_ttl=10,ext_recache_rate=100,'
              . 'ext_compact_under=2,ext_drop_under=1,ext_max_frag=0.5,ext_drop_unread,'
              . 'ext_threads=2,slab_automove_freeratio=0.02')
    };
    ok($srv, 'every ext_* option with a good value: the server runs') or diag($@);
    if ($srv) {
        my $set = mc_stats($srv->connect, 'settings');
        my %want = (ext_item_size => 1024, ext_item_age => 5, ext_low_ttl => 10,
            ext_recache_rate => 100, ext_wbuf_size => 2097152, ext_compact_under => 2,
            ext_drop_under => 1, ext_max_sleep => 1000000, ext_max_frag => '0.50',
            slab_automove_freeratio => '0.020', ext_drop_unread => 'yes');
        is($set->{$_}, $want{$_}, "stats settings $_ as given") for sort keys %want;
    }
}
# -o hashpower=12 with more threads is refused with memcached's three lines
like((run_briefly(5, '-o', 'hashpower=12'))[2],
    qr/cannot be equal to or less than item lock table.*\n.*grows with `-t N`.*\n.*hashpower=N/,
    'a hash table no larger than the item lock table: memcached\'s three lines');
# memcached ignores words that are not flags; so does this server
{
    my $srv = eval { start_server('stray', 'words') };
    ok($srv, 'stray words among the flags: the server runs') or diag($@);
    mc_is($srv->connect, "mn\r\n", "MN\r\n", 'and serves') if $srv;
}

# A local non-loopback IPv4 address, found without sending any packet.
sub external_address {
    my $u = IO::Socket::INET->new(PeerAddr => '192.0.2.1', PeerPort => 9, Proto => 'udp') or return undef;
    my $a = $u->sockhost;
    return ($a && $a !~ /^127\./ && $a ne '0.0.0.0') ? $a : undef;
}

# -o slab_sizes: the classes are the sizes given (rounded up to 8 bytes),
# then slab_chunk_max
for my $case (['96-200-304', [96, 200, 304]], ['100-200', [104, 200]]) {
    my ($list, $want) = @$case;
    my $srv = eval { start_server('-o', "slab_sizes=$list") };
    ok($srv, "-o slab_sizes=$list starts the server") or diag($@);
    next unless $srv;
    my $s = $srv->connect;
    mc_is($s, "set a 0 0 1\r\nx\r\nset b 0 0 1000\r\n" . ('y' x 1000) . "\r\n", "STORED\r\nSTORED\r\n",
        "-o slab_sizes=$list: a small and a large value stored");
    my $slabs = mc_stats($s, 'slabs');
    my %size = map { /^(\d+):chunk_size$/ ? ($1 => $slabs->{$_}) : () } keys %$slabs;
    my @used = map { $size{$_} } sort { $a <=> $b } keys %size;
    is($used[0], $want->[0], "-o slab_sizes=$list: the small value is in the first class ($want->[0] bytes)");
    is($used[-1], 524288, "-o slab_sizes=$list: the 1000-byte one in the largest (slab_chunk_max)");
    is(scalar(keys %size), 2, "-o slab_sizes=$list: two classes in use") or diag("@used");
    close $s;
    $srv->stop;
}

# the hash table grows past 1.5 items per bucket, unless -o no_hashexpand
for my $case (['hashpower=13', 14], ['hashpower=13,no_hashexpand', 13]) {
    my ($opts, $want) = @$case;
    my $srv = eval { start_server('-o', $opts) };
    ok($srv, "-o $opts starts the server") or diag($@);
    next unless $srv;
    my $s = $srv->connect;
    mc_send($s, join('', map { "set h$_ 0 0 1 noreply\r\nx\r\n" } 1 .. 20000));
    mc_is($s, "mn\r\n", "MN\r\n", "-o $opts: 20,000 keys into 8,192 buckets");
    my $st;
    select(undef, undef, undef, 0.5);    # time for a growth that should not come
    for (1 .. 100) {    # the table grows in the background
        $st = mc_stats($s);
        last if $st->{hash_power_level} == $want && !$st->{hash_is_expanding};
        select(undef, undef, undef, 0.05);
    }
    is($st->{hash_power_level}, $want, "-o $opts: hash_power_level $want");
    close $s;
    $srv->stop;
}

# -k locks the server's memory, -r raises its core file limit to the hard one
{
    my $srv = eval { start_server('-m', '16', '-k', '-r') };
    ok($srv, '-k -r start the server') or diag($@);
    if ($srv) {
        my $status = File::Spec->catfile('/proc', $srv->pid, 'status');
        my ($locked) = (slurp($status) =~ /^VmLck:\s+(\d+) kB/m);
      SKIP: {    # root without CAP_IPC_LOCK (some containers) gets a warning instead;
                 # AddressSanitizer makes mlockall a no-op
            skip 'mlockall not permitted here', 1
              if $> != 0 || $srv->log_text =~ /mlockall\(\) failed/;
            skip 'mlockall does nothing under AddressSanitizer', 1
              if slurp(File::Spec->catfile('/proc', $srv->pid, 'maps')) =~ /libasan/;
            cmp_ok($locked // 0, '>', 0, '-k: the server\'s memory is locked (VmLck)');
        }
        my ($soft, $hard) = (slurp(File::Spec->catfile('/proc', $srv->pid, 'limits'))
            =~ /^Max core file size\s+(\S+)\s+(\S+)/m);
        ok(defined $soft && $soft eq $hard, "-r: core file limit raised to the hard limit ($hard)");
        my $s = $srv->connect;
        mc_is($s, "set a 0 0 1\r\nx\r\nget a\r\n", "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n", '-k -r: server serves');
        close $s;
        $srv->stop;
    }
}

# -L: item memory taken in one piece at start (memcached wants 39 MB or
# more for it); the server serves within -m
{
    my $srv = eval { start_server('-m', '48', '-L') };
    ok($srv, '-L starts the server') or diag($@);
    if ($srv) {
        my $s = $srv->connect;
        my $value = 'v' x 100000;
        for my $batch (0 .. 5) {    # 60 MB of sets, 100 at a time
            mc_send($s, join('', map { "set l$_ 0 0 100000 noreply\r\n$value\r\n" } $batch * 100 + 1 .. $batch * 100 + 100));
            mc_is($s, "mn\r\n", "MN\r\n", "-L: sets " . ($batch * 100 + 1) . ".." . ($batch * 100 + 100) . " taken");
        }
        mc_is($s, "get l600\r\n", "VALUE l600 0 100000\r\n$value\r\nEND\r\n", '-L: the newest value is there after 60 MB of sets');
        my $st = mc_stats($s, '');
        cmp_ok($st->{evictions}, '>', 0, '-L: older values were evicted to stay within -m');
        cmp_ok($st->{bytes}, '<=', 48 * 1024 * 1024, '-L: bytes stored stay within -m');
        close $s;
        $srv->stop;
    }
}

# -d: the started process exits 0 and the daemon serves; -P names it and
# the file goes at SIGTERM
{
    my ($pfh, $pid_file) = File::Temp::tempfile('mcpid-XXXXXX', TMPDIR => 1);
    close $pfh;
    unlink $pid_file;
    my $port = free_port();
    my ($exited, $status, $log) = run_briefly(10, '-d', '-P', $pid_file, '-p', $port);
    ok($exited && $status == 0, '-d: the started process exits 0') or diag($log);
    my $daemon;
    for (1 .. 250) {
        ($daemon) = (slurp($pid_file) =~ /^(\d+)$/m);
        last if $daemon;
        select(undef, undef, undef, 0.02);
    }
    ok($daemon && kill(0, $daemon), '-d -P: the daemon runs under the pid in the file');
    my $s;
    for (1 .. 250) {
        $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp');
        last if $s;
        select(undef, undef, undef, 0.02);
    }
    ok($s, '-d: the daemon listens');
    if ($s) {
        binmode $s;
        $s->autoflush(1);
        mc_send($s, "version\r\n");
        like(mc_line($s), qr/^VERSION \S+\r\n\z/, '-d: the daemon serves');
        close $s;
    }
    if ($daemon) {
        kill 'TERM', $daemon;
        my $gone;
        for (1 .. 500) {
            # (a daemon whose parent is gone may stay a zombie here: its state is Z)
            my $state = (slurp("/proc/$daemon/status") =~ /^State:\s+(\S)/m)[0] // 'gone';
            $gone = ($state eq 'gone' || $state eq 'Z') && !-e $pid_file;
            last if $gone;
            select(undef, undef, undef, 0.02);
        }
        ok($gone, '-d: the daemon exits at SIGTERM and removes its pid file');
        kill 'KILL', $daemon unless $gone;
    }
    unlink $pid_file;
}


done_testing;
