package org.weft.bench;

import java.io.Serializable;
import java.util.List;

/**
 * The POJO of org.weft.bench.EchoService, as a Java service would declare it:
 * tags is a List, which is what makes the generic form's shape matter (Java's
 * GenericFilter returns it as an ArrayList, never as a String[]).
 */
public class User implements Serializable {
    private static final long serialVersionUID = 1L;

    public long id;
    public String name;
    public List<String> tags;
    public double score;

    public User() {}

    public User(long id, String name, List<String> tags, double score) {
        this.id = id;
        this.name = name;
        this.tags = tags;
        this.score = score;
    }
}
