# MCTLS.pm: TLS helpers for the t/tls suites. Owns the test certificates
# (made at test time with the openssl command into a temporary directory)
# and TLS client connections; the server is started with MCTest.
#
# API (all exported):
#   my $c = tls_certs();          hashref of PEM paths: ca, ca_key, server_crt,
#                                 server_key, client_crt, client_key (signed by
#                                 ca), other_ca, other_client_crt,
#                                 other_client_key (a second, unrelated CA),
#                                 server_pem (certificate and key in one file,
#                                 subject OU "Refreshed"), dir
#   my @args = tls_server_args($c [, @more_suboptions])
#                                 "-Z -o ssl_chain_cert=...,ssl_key=..."
#   my $s = tls_connect($port, %ssl_opts)
#                                 IO::Socket::SSL client (undef on failure,
#                                 reason in $MCTLS::error); no server
#                                 verification unless %ssl_opts ask for it
package MCTLS;
use strict;
use warnings;
use Exporter 'import';
use File::Temp qw(tempdir);
use IO::Socket::SSL;

our @EXPORT = qw(tls_certs tls_server_args tls_connect);
our $error = '';

sub _openssl {
    my @cmd = ('openssl', @_);
    my $out = qx{@cmd 2>&1};
    die "openssl @_ failed: $out" if $?;
}

# A key and a certificate signed by $ca (self-signed without one).
sub _cert {
    my ($dir, $name, $subj, $san, $ca, $ca_key) = @_;
    my ($key, $crt, $csr, $ext) = map {"$dir/$name$_"} ('_key.pem', '_crt.pem', '.csr', '.ext');
    _openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
        '-out', $key);
    if (!$ca) {
        _openssl('req', '-x509', '-new', '-key', $key, '-days', '3650', '-subj', "'$subj'",
            '-out', $crt);
        return ($crt, $key);
    }
    open my $fh, '>', $ext or die "$ext: $!";
    print $fh "subjectAltName=$san\n";
    close $fh;
    _openssl('req', '-new', '-key', $key, '-subj', "'$subj'", '-out', $csr);
    _openssl('x509', '-req', '-in', $csr, '-CA', $ca, '-CAkey', $ca_key, '-CAcreateserial',
        '-days', '3650', '-extfile', $ext, '-out', $crt);
    return ($crt, $key);
}

sub tls_certs {
    my $dir = tempdir('mctls-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my %c = (dir => $dir);
    @c{qw(ca ca_key)} = _cert($dir, 'ca', '/CN=memcached-rdma test CA');
    @c{qw(server_crt server_key)} = _cert($dir, 'server', '/CN=localhost/OU=Original',
        'DNS:localhost,IP:127.0.0.1', @c{qw(ca ca_key)});
    @c{qw(client_crt client_key)} = _cert($dir, 'client', '/CN=client', 'DNS:client',
        @c{qw(ca ca_key)});
    @c{qw(other_ca other_ca_key)} = _cert($dir, 'other_ca', '/CN=unrelated CA');
    @c{qw(other_client_crt other_client_key)} = _cert($dir, 'other_client', '/CN=stranger',
        'DNS:stranger', @c{qw(other_ca other_ca_key)});
    my ($crt, $key) = _cert($dir, 'refreshed', '/CN=localhost/OU=Refreshed',
        'DNS:localhost,IP:127.0.0.1', @c{qw(ca ca_key)});
    $c{server_pem} = "$dir/refreshed.pem";
    open my $out, '>', $c{server_pem} or die "$c{server_pem}: $!";
    for my $f ($crt, $key) {
        open my $in, '<', $f or die "$f: $!";
        local $/;
        my $text = <$in>;
        print $out $text;
    }
    close $out;
    return \%c;
}

sub tls_server_args {
    my ($c, @more) = @_;
    return ('-Z', '-o', join(',', "ssl_chain_cert=$c->{server_crt}",
        "ssl_key=$c->{server_key}", @more));
}

sub tls_connect {
    my ($port, %opt) = @_;
    my $s = IO::Socket::SSL->new(PeerAddr => "127.0.0.1:$port", Timeout => 5,
        SSL_verify_mode => SSL_VERIFY_NONE, %opt);
    if (!$s) {
        $error = $SSL_ERROR || $! || 'unknown';
        return undef;
    }
    binmode $s;
    $s->autoflush(1);
    return $s;
}

1;
